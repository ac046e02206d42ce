// Kept scrypt work areas: libcrypto's allocator, wrapped so that scrypt's one large block per
// derivation (32 MiB + 1 KiB at N = 2^15, r = 8) comes from a few areas mapped once and kept,
// instead of a fresh mapping made, faulted in page by page and unmapped by every login.
//
// Every other allocation goes to malloc, realloc and free unchanged, with no lock: a free only
// compares its pointer with the (at most a few) areas' addresses. The wrappers are installed by
// the constructor in setup.c, before libcrypto allocates anything (it refuses them after).
// Nothing is kept until portcullis_scrypt_areas_keep() is called (by `portcullis serve`): the
// CLI's one-off derivations map and unmap as before.
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "CLibCryptoSetup.h"

#define PORTCULLIS_MAX_AREAS 64

// An area's address is written once, before `made` counts it (release), and never changes: a
// reader that loads `made` (acquire) may read the addresses below it without the lock.
static void *area_base[PORTCULLIS_MAX_AREAS];
static atomic_int area_busy[PORTCULLIS_MAX_AREAS];
static atomic_int areas_made;
static atomic_size_t area_bytes;           // the size of each area; 0: nothing is kept
static int areas_limit;                    // areas made at most (under the lock)
static pthread_mutex_t areas_lock = PTHREAD_MUTEX_INITIALIZER;  // making an area, setting the size
static atomic_long areas_served, areas_declined;

// The index of the area starting at `pointer`, or -1.
static int area_index(const void *pointer) {
    int made = atomic_load_explicit(&areas_made, memory_order_acquire);
    for (int index = 0; index < made; index++) {
        if (area_base[index] == pointer) return index;
    }
    return -1;
}

// A free area for `size` bytes: a kept one, or a new one while under the limit; NULL: use malloc.
static void *take_area(size_t size) {
    size_t bytes = atomic_load(&area_bytes);
    if (bytes == 0 || size > bytes) return NULL;
    int made = atomic_load_explicit(&areas_made, memory_order_acquire);
    for (int index = 0; index < made; index++) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&area_busy[index], &expected, 1)) return area_base[index];
    }
    void *found = NULL;
    pthread_mutex_lock(&areas_lock);
    made = atomic_load(&areas_made);
    if (made < areas_limit) {
        void *mapped = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mapped != MAP_FAILED) {
            area_base[made] = mapped;
            atomic_store(&area_busy[made], 1);
            atomic_store_explicit(&areas_made, made + 1, memory_order_release);
            found = mapped;
        }
    }
    pthread_mutex_unlock(&areas_lock);
    return found;
}

static void *areas_malloc(size_t size, const char *file, int line) {
    (void)file; (void)line;
    // Only blocks of at least half an area are offered one: everything else (nearly every
    // allocation libcrypto makes) costs a comparison more than plain malloc.
    size_t bytes = atomic_load_explicit(&area_bytes, memory_order_relaxed);
    if (bytes > 0 && size >= bytes / 2) {
        void *area = take_area(size);
        atomic_fetch_add(area ? &areas_served : &areas_declined, 1);
        if (area != NULL) return area;
    }
    return malloc(size);
}

static void areas_free(void *pointer, const char *file, int line) {
    (void)file; (void)line;
    if (pointer == NULL) return;
    int index = area_index(pointer);
    if (index >= 0) {
        // libcrypto clears what held secrets before freeing it (scrypt's block: OPENSSL_clear_free).
        atomic_store(&area_busy[index], 0);
        return;
    }
    free(pointer);
}

static void *areas_realloc(void *pointer, size_t size, const char *file, int line) {
    if (pointer != NULL && area_index(pointer) >= 0) {
        // A kept area asked to change size (libcrypto does not do this for scrypt): copied out if it grows.
        size_t kept = atomic_load(&area_bytes);
        if (size <= kept) return pointer;
        void *moved = malloc(size);
        if (moved == NULL) return NULL;
        memcpy(moved, pointer, kept);
        areas_free(pointer, file, line);
        return moved;
    }
    return realloc(pointer, size);
}

int portcullis_scrypt_areas_install(void) {
    return CRYPTO_set_mem_functions(areas_malloc, areas_realloc, areas_free);
}

int portcullis_scrypt_areas_keep(int count, size_t bytes) {
    if (count < 0 || count > PORTCULLIS_MAX_AREAS || bytes == 0) return 0;
    pthread_mutex_lock(&areas_lock);
    // The size is set once: areas already made keep theirs.
    size_t current = atomic_load(&area_bytes);
    int accepted = current == 0 || current == bytes;
    if (accepted) {
        if (count > areas_limit) areas_limit = count;
        atomic_store(&area_bytes, bytes);
    }
    pthread_mutex_unlock(&areas_lock);
    return accepted;
}

void portcullis_scrypt_areas_counts(long *made, long *served, long *declined) {
    *made = atomic_load(&areas_made);
    *served = atomic_load(&areas_served);
    *declined = atomic_load(&areas_declined);
}
