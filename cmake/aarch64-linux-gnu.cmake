# Cross toolchain for aarch64 Linux (Debian's gcc-aarch64-linux-gnu and
# libc6-dev-arm64-cross), with qemu-user as the emulator so ctest runs the
# aarch64 test executables on an x86 host:
#
#   cmake -S . -B build-arm -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
#   cmake --build build-arm -j2 && (cd build-arm && ctest)
#
# QEMU_CPU in the environment picks the emulated core (max: dotprod + i8mm,
# cortex-a53: plain ASIMD); scripts/test-arm.sh runs the suite under both.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(VT_CROSS_PREFIX aarch64-linux-gnu- CACHE STRING "cross tool prefix")
set(VT_CROSS_SYSROOT /usr/aarch64-linux-gnu CACHE PATH "target libraries for qemu -L")
set(CMAKE_C_COMPILER ${VT_CROSS_PREFIX}gcc)

find_program(VT_QEMU_AARCH64 qemu-aarch64)
if(VT_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${VT_QEMU_AARCH64} -L ${VT_CROSS_SYSROOT})
endif()

# Look for libraries and headers of the target only; programs on the host.
set(CMAKE_FIND_ROOT_PATH ${VT_CROSS_SYSROOT} /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config must not hand the host's x86 libmicrohttpd/jansson to the cross
# link: only arm64 .pc files (multiarch, if any are installed) are visible.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
