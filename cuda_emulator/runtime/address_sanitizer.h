#pragma once
// SDP_EMU_ASAN is defined when AddressSanitizer instruments this file (gcc
// and clang say so differently); then its interface is included.
#if defined(__SANITIZE_ADDRESS__)
#define SDP_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SDP_EMU_ASAN 1
#endif
#endif
#ifdef SDP_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
