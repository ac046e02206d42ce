import CLibCryptoSetup

/// How libcrypto was initialised for this process.
public enum LibCryptoSetup {
    /// Whether libcrypto was initialised before main without its exit-time cleanup.
    ///
    /// With the cleanup, a thread still verifying a token while the process exits crashed in a
    /// freed lock (seen at the end of a sanitized test run). The C constructor in
    /// `CLibCryptoSetup` does the initialisation; this reports that it ran and succeeded.
    public static var skipsExitCleanup: Bool { portcullis_libcrypto_setup_result() == 1 }
}
