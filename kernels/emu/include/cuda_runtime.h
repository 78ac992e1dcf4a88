// Emulated CUDA build (MYTORCH_EMU): the CUDA runtime API and kernel language on the CPU.
#pragma once
#include "mytorch_emu/cuda.h"
