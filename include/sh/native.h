/* native.h: the native API surface (CONTRACT.md): how its errors look on the wire. */
#pragma once

#include "sh/error.h"

/* The contract's status and error type of a kind (section 8; pure). */
unsigned sh_native_status(sh_error_kind kind);
const char *sh_native_type(sh_error_kind kind);
