"""The tree as docs/architecture.md draws it, kept true (issue 48): every csrc folder and file is in the architecture
table; product code never imports mytorch.testing; registered functions, launcher structs, streams, optional data,
grid-stride loops and the sim's host route are each spelled one way. Each rule's checker is also run on a violation
it must report (its negative control), so none can pass vacuously."""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

ROOT_PATH = Path(ROOT)


# ---- the architecture table ----------------------------------------------------------------------------------------
def _table(text: str) -> dict[str, tuple[str, str]]:
    """The rows of docs/architecture.md's csrc table: folder -> (what it holds, the kernels families it feeds)."""
    section = text.split("### csrc, folder by folder", 1)[1].split("\n### ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\| `(csrc/[a-z/]+/)` \| (.*) \| (.*) \|$", line)
        if m:
            rows[m.group(1)] = (m.group(2), m.group(3))
    return rows


def _table_problems(text: str, root: Path) -> list[str]:
    rows = _table(text)
    problems = []
    folders = sorted({str(p.parent.relative_to(root)) + "/" for p in (root / "csrc").rglob("*") if p.is_file()})
    for folder in folders:
        if folder not in rows:
            problems.append(f"{folder} has no row")
            continue
        holds, feeds = rows[folder]
        for f in sorted((root / folder).iterdir()):
            if f.is_file() and f"`{f.stem}`" not in holds:
                problems.append(f"{folder}{f.name} is not in its row (as `{f.stem}`)")
        for header in re.findall(r"[a-z_]+\.h", feeds):
            if not (root / "kernels" / "include" / "mytorch" / header).exists():
                problems.append(f"{folder}: kernels family {header} does not exist")
    problems += [f"row {folder} names no folder" for folder in rows if folder not in folders]
    return problems


def test_architecture_table_lists_every_csrc_folder_and_file():
    text = (ROOT_PATH / "docs" / "architecture.md").read_text()
    assert not _table_problems(text, ROOT_PATH)
    # negative control: a file dropped from its row, and a folder's row removed, are reported
    broken = text.replace("`Blas` (", "Blas (", 1)
    assert _table_problems(broken, ROOT_PATH) == ["csrc/aten/linalg/Blas.cpp is not in its row (as `Blas`)"]
    no_ops = "\n".join(line for line in text.splitlines() if not line.startswith("| `csrc/ops/`"))
    assert "csrc/ops/ has no row" in _table_problems(no_ops, ROOT_PATH)


# ---- mytorch.testing is a leaf ---------------------------------------------------------------------------------------
def _imports_of_testing(source: str, module: str) -> list[str]:
    """The imports of mytorch.testing in `source`, the text of the module `module` (a dotted name)."""
    found = []
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        found += [n for n in names if n == "mytorch.testing" or n.startswith("mytorch.testing.")]
    return found


def test_product_code_never_imports_mytorch_testing():
    """mytorch.testing (the alignment suite, the fuzzer, the benchmark harness) is a leaf: the package never imports
    it, so a user's process never loads it (the tolerance rule mytorch.optimize needs is mytorch._tolerance)."""
    pkg = ROOT_PATH / "python" / "mytorch"
    bad = []
    for path in pkg.rglob("*.py"):
        rel = path.relative_to(pkg.parent)
        if rel.parts[1] == "testing":
            continue
        module = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        if rel.name == "__init__.py":
            module += ".__init__"
        bad += [f"{rel}: {n}" for n in _imports_of_testing(path.read_text(), module)]
    assert not bad, bad
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, mytorch, mytorch.ops; print(sorted(m for m in sys.modules if 'testing' in m))",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert loaded.returncode == 0, loaded.stderr
    assert "mytorch.testing" not in loaded.stdout, loaded.stdout
    # negative control: the forms an import can take are all seen
    assert _imports_of_testing("from .testing._compare import x", "mytorch._optimize") == [
        "mytorch.testing._compare",
        "mytorch.testing._compare.x",
    ]
    assert _imports_of_testing("from ..testing import bench", "mytorch.backend.x") == [
        "mytorch.testing",
        "mytorch.testing.bench",
    ]
    assert _imports_of_testing("import mytorch.testing.bench as b", "mytorch.x") == ["mytorch.testing.bench"]


# ---- names and helpers spelled one way -------------------------------------------------------------------------------
REGISTERED = re.compile(
    r'(?:MT_IMPL\(m,\s*"[^"]+",\s*|TORCH_FN\(|m\.impl\(\s*"[^"]+",\s*(?!TORCH_FN\(|torch::))([A-Za-z_][\w:]*)'
)


def _misnamed(source: str) -> list[str]:
    """Functions registered under a name that is not camelCase (ATen's own at::native:: functions aside)."""
    return [n for n in REGISTERED.findall(source) if "::" not in n and ("_" in n or not n[:1].islower())]


def _csrc(*folders: str) -> dict[str, str]:
    return {
        str(p.relative_to(ROOT_PATH)): p.read_text()
        for folder in folders
        for p in (ROOT_PATH / folder).rglob("*")
        if p.suffix in (".cpp", ".h", ".hpp", ".cu", ".cuh")
    }


def test_registered_functions_are_camel_case():
    """docs/architecture.md, "Conventions": functions camelCase in csrc (c10's style), so a registration reads
    `MT_IMPL(m, "index_select.out", indexSelectOut)` everywhere."""
    bad = {path: names for path, text in _csrc("csrc").items() if (names := _misnamed(text))}
    assert not bad, bad
    assert _misnamed('MT_IMPL(m, "relu_", relu_); m.impl("x", TORCH_FN(wrapper_x)); MT_IMPL(m, "y", fineName);') == [
        "relu_",
        "wrapper_x",
    ]


def test_launcher_structs_are_named_args():
    """A launcher's argument struct is `<Family>Args`; `EwParams` and `RedParams` are the op parameters inside the
    elementwise and reduction engines' Args (an op's alpha, bounds, dims), not launcher structs."""
    structs = re.findall(r"\bstruct (\w+Params)\b", "\n".join(_csrc("kernels/include").values()))
    assert sorted(set(structs)) == ["EwParams", "RedParams"], structs


def test_glue_helpers_are_used_not_spelled_out():
    """The glue names a launch's stream with streamFor and an optional tensor's data with dataOrNull (Glue.h), and
    the sim's host route with simHostRoute (Note [Sim host route]): none is spelled out by hand in csrc/aten or
    csrc/ops."""
    rules = {
        "a stream spelled out (streamFor)": re.compile(r"nativeHandle\(currentStream\("),
        "optional data spelled out (dataOrNull)": re.compile(r"(\w+)\.defined\(\) \? \1\.data_ptr(<[\w:]+>)?\(\) :"),
        "a host route without its name (simHostRoute)": re.compile(r"if \(onSim\(\)\)"),
    }
    allowed = {"csrc/aten/glue/Glue.h", "csrc/aten/glue/Glue.cpp", "csrc/aten/glue/HostRoute.cpp"}
    bad = [
        f"{path}: {what}"
        for path, text in _csrc("csrc/aten", "csrc/ops").items()
        if path not in allowed
        for what, rule in rules.items()
        if rule.search(text)
    ]
    assert not bad, bad
    host_views = [p for p, t in _csrc("csrc/aten", "csrc/ops").items() if "hostView(" in t and "simHostRoute(" not in t]
    assert not host_views, f"host views outside a named host route: {host_views}"
    assert rules["optional data spelled out (dataOrNull)"].search("a.w = w.defined() ? w.data_ptr<float>() : nullptr;")


def test_grid_stride_loops_use_the_helper():
    """kernels/cuda loops over a launch's items through grid_stride / block_stride (common.cuh), not by hand."""
    thread = re.compile(r"\+= (?:int64_t|static_cast<int64_t>)\(gridDim\.x\) \* blockDim\.x\)")
    block = re.compile(r"= blockIdx\.x; \w+ < [^;]+; \w+ \+= gridDim\.x\)")
    kernels = {p: t for p, t in _csrc("kernels/cuda").items() if not p.endswith("common.cuh")}
    bad = [p for p, t in kernels.items() if thread.search(t) or block.search(t)]
    assert not bad, bad
    assert sum(t.count("grid_stride(") + t.count("block_stride(") for t in kernels.values()) >= 40
    assert thread.search("for (int64_t i = x; i < n; i += int64_t(gridDim.x) * blockDim.x)")


def test_every_source_is_under_800_lines():
    """docs/contributing.md: one concept per file, under ~800 lines."""
    files = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=ROOT, check=True).stdout.split()
    long = {}
    for f in files:
        if f.endswith((".cpp", ".h", ".cu", ".cuh", ".py")) and os.path.isfile(os.path.join(ROOT, f)):
            with open(os.path.join(ROOT, f)) as fh:
                n = sum(1 for _ in fh)
            if n > 800:
                long[f] = n
    assert not long, long
