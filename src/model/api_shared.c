/* api_shared.c — the one source of libtinylm.so of its own; the rest is the static library's
 * objects linked whole (CMakeLists.txt). The Python package checks this number. */
#include "tinylm.h"

int tlm_abi_version(void) { return 1; }
