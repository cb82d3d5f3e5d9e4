/* VT_UNROLL(n): `#pragma GCC unroll n` for the loop that follows, in the kernels
 * whose register tiles need their small loops fully unrolled (arrays of vectors
 * stay in registers only then). Nothing when not optimizing: at -O0 GCC drops
 * the annotation of loops it does not keep as loops with a warning ("ignoring
 * loop annotation") that -Werror turns into an error, and an unoptimized build
 * has no registers to keep. Nothing either where VT_NO_UNROLL is defined (the
 * ASan build, CMakeLists.txt): unrolled and instrumented, these tiles are most of
 * that build's compile time. */
#ifndef VT_CPU_UNROLL_H
#define VT_CPU_UNROLL_H

#define VT_PRAGMA_(x) _Pragma(#x)
#if defined(__OPTIMIZE__) && !defined(VT_NO_UNROLL)
#define VT_UNROLL(n) VT_PRAGMA_(GCC unroll n)
#else
#define VT_UNROLL(n)
#endif

#endif
