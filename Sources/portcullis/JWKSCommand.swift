import ArgumentParser
import JOSE

struct JWKSCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "jwks",
        abstract: "Print the public JWKS (next, active and retired keys; never a symmetric key)."
    )

    @Option(help: "The keys directory.")
    var keys = "keys"

    func run() throws {
        let keySet = try KeySource.load(keysDirectory: keys, jwksFile: nil)
        print(JSONWriter.pretty(.object(keySet.publicJWKS())))
    }
}
