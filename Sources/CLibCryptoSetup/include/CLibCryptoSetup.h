// CLibCryptoSetup: initialises libcrypto once, before main, with the options a server needs.
#ifndef PORTCULLIS_CLIBCRYPTO_SETUP_H
#define PORTCULLIS_CLIBCRYPTO_SETUP_H

#include <stddef.h>

/// 1 when libcrypto was initialised before main without its exit-time cleanup, 0 when that failed.
int portcullis_libcrypto_setup_result(void);

/// 1 when libcrypto's allocator was wrapped for kept scrypt work areas (before its first allocation), 0 when it refused.
int portcullis_scrypt_areas_result(void);

/// Keeps up to `count` scrypt work areas of `bytes` each once they are first needed (mapped once, never
/// returned). The size is set by the first call; 1 when accepted, 0 for another size or a bad count.
int portcullis_scrypt_areas_keep(int count, size_t bytes);

/// How many areas are mapped, how many large blocks they served, and how many large blocks went to malloc.
void portcullis_scrypt_areas_counts(long *made, long *served, long *declined);

#endif
