# Warnings, hardening and the optional sanitizer build, applied per target.
set(SH_WARNINGS
  -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wvla -Wpointer-arith -Wmissing-prototypes
  -Wstrict-prototypes -Wundef -Wno-unused-parameter -Werror=implicit-function-declaration
  -Werror=return-type -Werror=incompatible-pointer-types -Werror=int-conversion)
set(SH_HARDENING -fstack-protector-strong -fno-strict-aliasing -fPIE)

function(sh_apply_warnings target)
  target_compile_options(${target} PRIVATE ${SH_WARNINGS} ${SH_HARDENING})
  if(NOT SH_SANITIZE AND NOT SH_FUZZ AND NOT CMAKE_BUILD_TYPE STREQUAL "Debug")
    target_compile_definitions(${target} PRIVATE _FORTIFY_SOURCE=2)
  endif()
  target_link_options(${target} PRIVATE -Wl,-z,relro -Wl,-z,now -Wl,-z,noexecstack -pie)
endfunction()

# A static executable (sandbox-init): the same warnings and hardening, static-pie, -O2 and
# fortified in every build type, and without the sanitizers (they cannot link statically).
function(sh_apply_static target)
  set_property(TARGET ${target} PROPERTY COMPILE_OPTIONS ${SH_WARNINGS} ${SH_HARDENING} -O2)
  set_property(TARGET ${target} PROPERTY LINK_OPTIONS -static-pie -Wl,-z,relro -Wl,-z,now
    -Wl,-z,noexecstack)
  target_compile_definitions(${target} PRIVATE _GNU_SOURCE _FORTIFY_SOURCE=2)
endfunction()

if(SH_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
    -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()

# The fuzz build (SH_FUZZ, clang): every library with the fuzzer's coverage and ASan+UBSan
# (never fortified, as with SH_SANITIZE); the targets link libFuzzer itself (tests/fuzz). The
# three warnings clang gives and gcc does not (a va_list format passed on in error.c and
# server.c, libseccomp's SCMP_A0 macro) are shown there, not fatal.
if(SH_FUZZ)
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
    -fno-omit-frame-pointer -Wno-error=format-nonliteral -Wno-error=missing-field-initializers)
  add_link_options(-fsanitize=address,undefined)
endif()
