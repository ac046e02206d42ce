#ifndef PORTCULLIS_CBUILDINFO_H
#define PORTCULLIS_CBUILDINFO_H

/// The commit the binary was built from: set by scripts/package.sh
/// (-Xcc -DPORTCULLIS_COMMIT=...), "unknown" in a plain `swift build`.
const char *portcullis_build_commit(void);

#endif
