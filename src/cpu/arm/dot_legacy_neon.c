/* Plain ASIMD dots of the 32-element block types (see dot_legacy_impl.h). */
#define ARM_SFX neon
#include "cpu/arm/dot_legacy_impl.h"
