#ifndef PORTCULLIS_CBUILDINFO_H
#define PORTCULLIS_CBUILDINFO_H

/// The commit the binary was built from: stamped into the binary by scripts/package.sh,
/// "unknown" in a plain `swift build`.
const char *portcullis_build_commit(void);

#endif
