/* The 32-element block dots with sdot (ARMv8.2 dotprod; see dot_legacy_impl.h). */
#define ARM_SFX neon_dot
#include "cpu/arm/dot_legacy_impl.h"
