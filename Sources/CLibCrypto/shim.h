// CLibCrypto: the OpenSSL 3 libcrypto headers, plus inline wrappers for the few
// macros Swift cannot import. No logic lives here; the JOSE module owns all use.
#ifndef PORTCULLIS_CLIBCRYPTO_SHIM_H
#define PORTCULLIS_CLIBCRYPTO_SHIM_H

#include <openssl/opensslv.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#if OPENSSL_VERSION_MAJOR < 3
#error "Portcullis needs OpenSSL libcrypto 3 or later (apt: libssl-dev)"
#endif

/// OPENSSL_free is a macro carrying file and line; Swift cannot call it.
static inline void portcullis_openssl_free(void *pointer) { OPENSSL_free(pointer); }

/// BIO_get_mem_data is a macro over BIO_ctrl.
static inline long portcullis_bio_get_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }

/// Selection constants for EVP_PKEY_fromdata are composed macros.
static inline int portcullis_selection_public_key(void) { return EVP_PKEY_PUBLIC_KEY; }
static inline int portcullis_selection_keypair(void) { return EVP_PKEY_KEYPAIR; }

#endif
