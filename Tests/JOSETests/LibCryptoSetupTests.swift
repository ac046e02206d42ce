import JOSE
import Testing

@Suite("libcrypto set-up")
struct LibCryptoSetupTests {
    @Test("libcrypto is initialised before main without its exit-time cleanup, so a thread verifying at exit finds its locks alive")
    func noExitCleanup() throws {
        #expect(LibCryptoSetup.skipsExitCleanup)
        // Still usable after the set-up: a signature made now verifies.
        let key = try JWSKey.generate(algorithm: .es256)
        let message = Array("m".utf8)
        #expect(key.verify(signature: try key.sign(message), message: message))
    }
}
