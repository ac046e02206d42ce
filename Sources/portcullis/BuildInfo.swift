import CBuildInfo

/// What `portcullis --version` prints: the release and the commit it was built from.
enum BuildInfo {
    /// The release (semantic versioning); the package's version too (scripts/package.sh).
    static let version = "0.1.0"

    /// The commit: named by scripts/package.sh, `unknown` in a plain `swift build`.
    static var commit: String { String(cString: portcullis_build_commit()) }

    /// `portcullis 0.1.0 (commit 1a2b3c4...)`.
    static var line: String { "portcullis \(version) (commit \(commit))" }
}
