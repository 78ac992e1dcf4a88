"""torch.multiprocessing with mytorch tensors (python/mytorch/backend/ipc.py): a tensor sent to another process
is a view of the same device memory, in both directions, as CUDA IPC gives torch.cuda; the sender keeps the
memory until the receiver lets it go; what cannot be shared is refused with an exception."""

import pickle

import pytest
import torch
import torch.multiprocessing as mp
from multiprocessing.reduction import ForkingPickler

CTX = mp.get_context("spawn")
TIMEOUT = 120


def _worker(inbox, outbox):
    """Serves commands from the test: each gets the tensors it names and answers with results."""
    import torch  # noqa: F811 (spawned)
    import mytorch  # noqa: F401 (scripts/emu.sh turns torch's autoload off)

    held = []
    while True:
        cmd, args = inbox.get()
        try:
            if cmd == "stop":
                return
            if cmd == "add_":  # write through the shared memory
                t, value = args
                t.add_(value)
                if t.device.type == "mytorch":
                    torch.mytorch.synchronize(t.device)  # the write lands before the answer
                outbox.put(("ok", None))
            elif cmd == "read":  # what the receiver sees, as CPU tensors
                outbox.put(
                    (
                        "ok",
                        [
                            (
                                t.device.type,
                                t.device.index,
                                t.dtype,
                                type(t).__name__,
                                t.requires_grad,
                                t.detach().cpu(),
                            )
                            for t in args
                        ],
                    )
                )
            elif cmd == "hold":  # keep a received tensor past its message
                held.append(args)
                outbox.put(("ok", None))
            elif cmd == "read_held":
                outbox.put(("ok", held[-1].cpu()))
            elif cmd == "drop":
                held.clear()
                outbox.put(("ok", None))
            elif cmd == "make":  # a tensor the receiver allocates, sent back
                t = torch.arange(6.0, device="mytorch").reshape(2, 3) * 10
                outbox.put(("ok", t))
                held.append(t)
            elif cmd == "forward":  # a received tensor sent on (pickled here: a queue
                from multiprocessing.reduction import ForkingPickler  # pickles in its feeder thread)

                ForkingPickler.dumps(args)
                outbox.put(("ok", None))
        except Exception as e:  # noqa: BLE001 - reported to the test
            outbox.put(("error", f"{type(e).__name__}: {e}"))


def _producer(queue, done):
    import torch  # noqa: F811 (spawned)
    import mytorch  # noqa: F401 (scripts/emu.sh turns torch's autoload off)

    t = torch.arange(1.0, 5.0, device="mytorch")[1:]
    queue.put(t)
    done.wait(TIMEOUT)
    del t  # while the receiver still holds it: the send's reference keeps the memory until exit


@pytest.fixture(scope="module")
def worker():
    inbox, outbox = CTX.Queue(), CTX.Queue()
    p = CTX.Process(target=_worker, args=(inbox, outbox), daemon=True)
    p.start()

    def call(cmd, args=None):
        inbox.put((cmd, args))
        status, value = outbox.get(timeout=TIMEOUT)
        if status == "error":
            raise RuntimeError(value)
        return value

    yield call
    inbox.put(("stop", None))
    p.join(TIMEOUT)
    assert p.exitcode == 0
    # every tensor the worker received is released by now, so the sender holds none of their memory
    assert torch.mytorch.ipc_collect() == 0


def test_writes_are_seen_by_both_processes(worker):
    x = torch.arange(12.0, device="mytorch")
    view = x.view(3, 4)[:, 1::2]  # a strided view with an offset
    worker("add_", (view, 100.0))
    want = torch.arange(12.0).view(3, 4)
    want[:, 1::2] += 100
    assert torch.equal(x.cpu(), want.view(-1))
    got = worker("make")  # and from the child to the parent
    assert got.device == torch.device("mytorch", 0)
    assert torch.equal(got.cpu(), torch.arange(6.0).reshape(2, 3) * 10)
    got.mul_(2)
    assert torch.equal(worker("read_held"), torch.arange(6.0).reshape(2, 3) * 20)
    worker("drop")


def test_dtypes_parameters_and_empty_tensors_arrive_as_sent(worker):
    sent = [
        torch.randn(4, 5, device="mytorch").t(),
        torch.arange(7, dtype=torch.int64, device="mytorch")[2:],
        torch.tensor([True, False], device="mytorch"),
        torch.randn(3, dtype=torch.bfloat16, device="mytorch"),
        torch.nn.Parameter(torch.ones(2, device="mytorch")),
        torch.empty(0, 3, device="mytorch"),
        torch.ones(3, device="mytorch", requires_grad=True),
    ]
    got = worker("read", sent)
    for s, (dev, index, dtype, cls, requires_grad, value) in zip(sent, got):
        assert (dev, index, dtype, requires_grad) == ("mytorch", 0, s.dtype, s.requires_grad)
        assert cls == ("Parameter" if isinstance(s, torch.nn.Parameter) else "Tensor")
        assert torch.equal(value, s.detach().cpu())


def test_cpu_tensors_still_take_torchs_path(worker):
    c = torch.zeros(3)
    worker("add_", (c, 1.0))  # torch moves it to shared memory; the child's write is seen here
    assert torch.equal(c, torch.ones(3))


def test_sender_keeps_memory_until_the_receiver_lets_go(worker):
    torch.mytorch.ipc_collect()
    x = torch.full((1 << 16,), 7.0, device="mytorch")
    worker("hold", x)
    del x
    churn = [torch.full((1 << 16,), -1.0, device="mytorch") for _ in range(8)]  # would reuse a freed block
    assert torch.equal(worker("read_held"), torch.full((1 << 16,), 7.0))
    assert torch.mytorch.ipc_collect() >= 1
    worker("drop")
    assert torch.mytorch.ipc_collect() == 0
    del churn


def test_sender_exits_cleanly_while_the_receiver_holds_its_tensor():
    queue, done = CTX.Queue(), CTX.Event()
    p = CTX.Process(target=_producer, args=(queue, done))
    p.start()
    t = queue.get(timeout=TIMEOUT)
    assert t.device.type == "mytorch" and t.storage_offset() == 1
    assert t.cpu().tolist() == [2.0, 3.0, 4.0]
    done.set()
    p.join(TIMEOUT)
    assert p.exitcode == 0
    del t


def test_what_cannot_be_shared_is_refused(worker):
    y = torch.ones(2, device="mytorch", requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor"):
        ForkingPickler.dumps(y)
    with pytest.raises(RuntimeError, match="Cannot pickle mytorch storage"):
        ForkingPickler.dumps(torch.ones(2, device="mytorch").untyped_storage())
    got = worker("make")
    with pytest.raises(RuntimeError, match="cannot be sent on"):
        ForkingPickler.dumps(got)
    with pytest.raises(RuntimeError, match="cannot be sent on"):
        worker("forward", torch.ones(2, device="mytorch"))
    worker("drop")


def test_received_in_the_sending_process_is_the_same_storage():
    x = torch.arange(5.0, device="mytorch")
    y = pickle.loads(ForkingPickler.dumps(x[1:]))
    assert y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    y.add_(1)
    assert torch.equal(x.cpu(), torch.tensor([0.0, 2, 3, 4, 5]))


def test_tensor_on_the_second_device_arrives_there(worker, two_devices):
    x = torch.zeros(4, device=two_devices[1])
    got = worker("read", [x])
    assert got[0][:2] == ("mytorch", 1)
    worker("add_", (x, 3.0))
    assert torch.equal(x.cpu(), torch.full((4,), 3.0))
