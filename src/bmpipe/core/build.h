// What the build itself changes about the program's timing.
#pragma once

// Sanitized builds (ASan + UBSan, TSan; scripts/test.sh) run several times slower than release
// ones; their allocator maps and unmaps every large block.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BMPIPE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define BMPIPE_SANITIZED 1
#endif
#endif

namespace bmpipe {

#ifdef BMPIPE_SANITIZED
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif

}  // namespace bmpipe
