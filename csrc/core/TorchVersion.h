// The torch this extension is compiled against. The project pins torch 2.13; the cuda flavour must also build on
// the lent GPU machines, whose torch is 2.11 (docs/gpu.md, "Offline, torch 2.11"). The few APIs newer than 2.11 are
// gated on this one macro: torch.accelerator.Graph's registry (Graph.cpp), two symmetric-memory hooks
// (SymmetricMemory.cpp) and _flash_attention_forward's block_table and num_splits arguments (AttentionVariants.cpp),
// all added in 2.12.
#pragma once

#include <torch/headeronly/version.h>

#define MYTORCH_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))
