// libcrypto registers an atexit handler (OPENSSL_cleanup) on its first initialisation. In a
// server whose threads may still be verifying a token while the process exits (a signal, the
// end of a test run), that handler frees the library's locks under them and the process dies
// with SIGSEGV on its way out. OPENSSL_INIT_NO_ATEXIT must be given on the very first call, so
// it is made here, in a constructor, before any Swift code can touch libcrypto.
#include <openssl/crypto.h>
#include "CLibCryptoSetup.h"

static int setup_result = 0;
static int areas_result = 0;

int portcullis_scrypt_areas_install(void);

__attribute__((constructor))
static void portcullis_libcrypto_setup(void) {
    // The allocator first: libcrypto accepts a replacement only before it has allocated anything.
    areas_result = portcullis_scrypt_areas_install();
    setup_result = OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
}

int portcullis_libcrypto_setup_result(void) { return setup_result; }

int portcullis_scrypt_areas_result(void) { return areas_result; }
