/* The K-quant super-block dots with sdot (ARMv8.2 dotprod; see dot_k_impl.h). */
#define ARM_SFX neon_dot
#include "cpu/arm/dot_k_impl.h"
