#include "CBuildInfo.h"

// A C string because SwiftPM can define only flags for Swift; a release build names the commit
// here with -Xcc -DPORTCULLIS_COMMIT='"<sha>"'.
#ifndef PORTCULLIS_COMMIT
#define PORTCULLIS_COMMIT "unknown"
#endif

const char *portcullis_build_commit(void) { return PORTCULLIS_COMMIT; }
