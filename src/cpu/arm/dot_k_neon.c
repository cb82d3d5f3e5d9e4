/* Plain ASIMD dots of the K-quant super-block types (see dot_k_impl.h). */
#define ARM_SFX neon
#include "cpu/arm/dot_k_impl.h"
