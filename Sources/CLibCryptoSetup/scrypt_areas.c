// Kept scrypt work areas: libcrypto's allocator, wrapped so that scrypt's one large block per
// derivation (32 MiB + 1 KiB at N = 2^15, r = 8) comes from a few areas mapped once and kept,
// instead of a fresh mapping made, faulted in page by page and unmapped by every login.
//
// Every other allocation goes to malloc, realloc and free unchanged. The wrappers are installed
// by the constructor in setup.c, before libcrypto allocates anything (it refuses them after).
// Nothing is kept until portcullis_scrypt_areas_keep() is called (by `portcullis serve`): the
// CLI's one-off derivations map and unmap as before.
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include "CLibCryptoSetup.h"

#define PORTCULLIS_MAX_AREAS 64

static struct {
    pthread_mutex_t lock;                  // guards the fields below but the atomics, which are set under it
    atomic_size_t bytes;                   // the size of each area; 0: nothing is kept
    int limit;                             // areas made at most
    atomic_int made;                       // areas mapped so far (never unmapped)
    void *base[PORTCULLIS_MAX_AREAS];
    int busy[PORTCULLIS_MAX_AREAS];
    atomic_long served, declined;
} areas = { .lock = PTHREAD_MUTEX_INITIALIZER };

// An area for `size` bytes: a free kept one, a new one while under the limit, or NULL (malloc it).
static void *take_area(size_t size) {
    void *found = NULL;
    pthread_mutex_lock(&areas.lock);
    size_t bytes = atomic_load(&areas.bytes);
    if (bytes > 0 && size <= bytes) {
        for (int index = 0; index < areas.made && found == NULL; index++) {
            if (!areas.busy[index]) { areas.busy[index] = 1; found = areas.base[index]; }
        }
        if (found == NULL && areas.made < areas.limit) {
            void *mapped = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (mapped != MAP_FAILED) {
                areas.base[areas.made] = mapped;
                areas.busy[areas.made] = 1;
                atomic_store(&areas.made, areas.made + 1);
                found = mapped;
            }
        }
    }
    pthread_mutex_unlock(&areas.lock);
    atomic_fetch_add(found ? &areas.served : &areas.declined, 1);
    return found;
}

// 1 and the area freed when `pointer` is the start of a kept area; 0 otherwise.
static int give_area(void *pointer) {
    int given = 0;
    pthread_mutex_lock(&areas.lock);
    for (int index = 0; index < areas.made && !given; index++) {
        if (areas.base[index] == pointer) { areas.busy[index] = 0; given = 1; }
    }
    pthread_mutex_unlock(&areas.lock);
    return given;
}

// Only blocks at least half an area's size are looked at: everything else (nearly every
// allocation libcrypto makes) costs one comparison more than plain malloc.
static int is_large(size_t size) {
    size_t bytes = atomic_load(&areas.bytes);
    return bytes > 0 && size >= bytes / 2;
}

static void *areas_malloc(size_t size, const char *file, int line) {
    (void)file; (void)line;
    if (is_large(size)) {
        void *area = take_area(size);
        if (area != NULL) return area;
    }
    return malloc(size);
}

static void areas_free(void *pointer, const char *file, int line) {
    (void)file; (void)line;
    if (pointer == NULL) return;
    if (atomic_load(&areas.made) > 0 && give_area(pointer)) return;
    free(pointer);
}

static void *areas_realloc(void *pointer, size_t size, const char *file, int line) {
    if (pointer != NULL && atomic_load(&areas.made) > 0) {
        pthread_mutex_lock(&areas.lock);
        size_t kept = 0;
        for (int index = 0; index < areas.made; index++) {
            if (areas.base[index] == pointer) kept = atomic_load(&areas.bytes);
        }
        pthread_mutex_unlock(&areas.lock);
        if (kept > 0) {
            // A kept area asked to change size (libcrypto does not do this for scrypt): copied out.
            if (size <= kept) return pointer;
            void *moved = malloc(size);
            if (moved == NULL) return NULL;
            memcpy(moved, pointer, kept);
            areas_free(pointer, file, line);
            return moved;
        }
    }
    return realloc(pointer, size);
}

int portcullis_scrypt_areas_install(void) {
    return CRYPTO_set_mem_functions(areas_malloc, areas_realloc, areas_free);
}

int portcullis_scrypt_areas_keep(int count, size_t bytes) {
    if (count < 0 || count > PORTCULLIS_MAX_AREAS || bytes == 0) return 0;
    pthread_mutex_lock(&areas.lock);
    // Set once: areas already made keep their size.
    size_t current = atomic_load(&areas.bytes);
    int accepted = current == 0 || current == bytes;
    if (accepted) {
        atomic_store(&areas.bytes, bytes);
        if (count > areas.limit) areas.limit = count;
    }
    pthread_mutex_unlock(&areas.lock);
    return accepted;
}

void portcullis_scrypt_areas_counts(long *made, long *served, long *declined) {
    pthread_mutex_lock(&areas.lock);
    *made = atomic_load(&areas.made);
    pthread_mutex_unlock(&areas.lock);
    *served = atomic_load(&areas.served);
    *declined = atomic_load(&areas.declined);
}
