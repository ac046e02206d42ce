#include "CBuildInfo.h"

// The commit is stamped into the built binary by scripts/package.sh, not compiled in: a compile-time
// define would change every target's flags and so rebuild the whole package, where a stamp lets the
// package be made from a binary built already (CI packages its debug build). The marker is found
// once in the file and the 48 bytes after it are overwritten with the commit and NULs; a plain
// `swift build` says "unknown". Not `const`, so that no optimiser folds the text into its reader.
#define PORTCULLIS_COMMIT_MARKER "PORTCULLIS-COMMIT-STAMP:"

static char portcullis_commit_stamp[sizeof(PORTCULLIS_COMMIT_MARKER) - 1 + 48] = PORTCULLIS_COMMIT_MARKER "unknown";

const char *portcullis_build_commit(void) { return portcullis_commit_stamp + sizeof(PORTCULLIS_COMMIT_MARKER) - 1; }
