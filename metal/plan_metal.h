/* The Metal backends' tables (plan_metal.c): "metal" on a Mac's GPU
 * (host_metal.m) and "metal-emu", the same shaders and encoder on the CPU
 * emulator (metal/emu). Each is built only where its dispatch layer is. */
#ifndef HEARTH_METAL_PLAN_METAL_H
#define HEARTH_METAL_PLAN_METAL_H

#include "engine/model/backend.h"

#ifdef HEARTH_METAL
extern const backend backend_metal;
/* A Metal device exists (host_metal.m). */
bool md_host_available(void);
#endif
#ifdef HEARTH_METAL_EMU
extern const backend backend_metal_emu;
#endif

#endif
