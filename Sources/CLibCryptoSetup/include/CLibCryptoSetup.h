// CLibCryptoSetup: initialises libcrypto once, before main, with the options a server needs.
#ifndef PORTCULLIS_CLIBCRYPTO_SETUP_H
#define PORTCULLIS_CLIBCRYPTO_SETUP_H

/// 1 when libcrypto was initialised before main without its exit-time cleanup, 0 when that failed.
int portcullis_libcrypto_setup_result(void);

#endif
