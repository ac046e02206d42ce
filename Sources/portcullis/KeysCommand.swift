import ArgumentParser
import ConfigurationReading
import Foundation
import JOSE
import Logging
import StateSurface

struct KeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "Manage the signing keys in keys/.",
        subcommands: [Generate.self, Import.self, List.self, Rotate.self, Retire.self]
    )

    struct Generate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Generate a key; the first becomes active, later ones next.")

        @OptionGroup var options: NewKeyOptions

        @Option(help: "RSA modulus size for RS*/PS* keys.")
        var bits = 2048

        @OptionGroup var announcement: KeyRingAnnouncement

        func run() async throws {
            let record = try KeyDirectory(path: options.dir).generate(algorithm: options.alg, kid: options.kid, status: options.state, rsaBits: bits)
            let file = options.dir + "/" + record.kid + (options.alg.family == .hmac ? ".jwk" : ".pem")
            print("generated \(options.alg.rawValue) key \(record.kid) (\(record.status.rawValue)) in \(file)")
            await announcement.announce()
        }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add a key made elsewhere: a PEM file (PKCS#8 private or SPKI public, as openssl genpkey and openssl pkey -pubout write), a JWK, or an HMAC secret's raw bytes.",
            discussion: """
                The key must fit --alg (type, curve, size; HMAC secrets at least the hash's length). \
                A private key file must not be readable by other users. The key is written 0600 \
                under its kid (the RFC 7638 thumbprint unless --kid), like a generated one. A \
                public key alone is added retired: it verifies, it never signs.
                """
        )

        @Argument(help: "The key file.")
        var file: String

        @OptionGroup var options: NewKeyOptions

        @OptionGroup var announcement: KeyRingAnnouncement

        func run() async throws {
            let key = try KeyFileImport(path: file).key(algorithm: options.alg, kid: options.kid)
            let record = try KeyDirectory(path: options.dir).add(key, status: options.state)
            print("imported \(record.algorithm.rawValue) key \(record.kid) (\(record.status.rawValue)) into \(options.dir)")
            await announcement.announce()
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the keys with their algorithm and status.")

        @Option(help: "The keys directory.")
        var dir = "keys"

        func run() throws {
            let records = try KeyDirectory(path: dir).records()
            if records.isEmpty {
                print("no keys in \(dir); create one with `portcullis keys generate --alg ES256`")
                return
            }
            let width = max(3, records.map(\.kid.count).max() ?? 3)
            print("KID".padding(toLength: width, withPad: " ", startingAt: 0) + "  ALG    STATUS   CREATED")
            for record in records {
                print(record.kid.padding(toLength: width, withPad: " ", startingAt: 0) + "  "
                    + record.algorithm.rawValue.padding(toLength: 5, withPad: " ", startingAt: 0) + "  "
                    + record.status.rawValue.padding(toLength: 7, withPad: " ", startingAt: 0) + "  "
                    + TimeText.iso8601(record.createdAt))
            }
        }
    }

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Activate the next key and retire the active one.")

        @Option(help: "The keys directory.")
        var dir = "keys"

        @Option(parsing: .unconditional, help: "The next key to activate. Default: the oldest next key (published longest).")
        var kid: String?

        @OptionGroup var announcement: KeyRingAnnouncement

        func run() async throws {
            let (activated, retired, waiting) = try KeyDirectory(path: dir).rotate(kid: kid)
            print("activated \(activated.kid)" + (retired.map { "; retired \($0.kid)" } ?? ""))
            if waiting > 1 {
                Terminal.note(
                    kid == nil
                        ? "\(waiting) next keys were waiting: activated the oldest, \(activated.kid); --kid chooses another"
                        : "\(waiting - 1) other next key(s) still wait")
            }
            await announcement.announce()
        }
    }

    struct Retire: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Mark a key retired: published and verifying, no longer signing.")

        /// An array only so that a kid beginning with "-" is read as the kid, not an unknown option:
        /// thumbprint kids are base64url, and one in 64 begins with "-".
        @Argument(parsing: .allUnrecognized, help: "The key id (one; one that begins with \"-\" is read as a key id too).")
        var kid: [String]

        @Option(help: "The keys directory.")
        var dir = "keys"

        @OptionGroup var announcement: KeyRingAnnouncement

        func validate() throws {
            // Unknown options land here too (the kid takes what no option claims): said as such.
            if let option = kid.first(where: { $0.hasPrefix("--") }) { throw ValidationError("unknown option \(option)") }
            guard kid.count == 1 else {
                throw ValidationError(kid.isEmpty ? "name the key to retire: portcullis keys retire KID" : "retire one key at a time; got \(kid.count) key ids")
            }
        }

        func run() async throws {
            let record = try KeyDirectory(path: dir).retire(kid: kid[0])
            print("retired \(record.kid)")
            await announcement.announce()
        }
    }
}

/// Where a new key (generated or imported) goes and what it is for.
struct NewKeyOptions: ParsableArguments {
    @Option(help: "Algorithm the key is for: \(JWSAlgorithm.allValueStrings.joined(separator: ", ")).")
    var alg: JWSAlgorithm

    @Option(help: "The keys directory.")
    var dir = "keys"

    @Option(parsing: .unconditional, help: "Key id (default: the RFC 7638 thumbprint; a random id for HMAC keys; an imported JWK's own kid).")
    var kid: String?

    @Option(help: "next or active (default: active if no key is, else next). An imported public key is always retired.")
    var state: KeyStatus?

    func validate() throws {
        if state == .retired { throw ValidationError("--state must be next or active") }
    }
}

/// Tells running instances that share a PostgreSQL store to reload the key ring now
/// (they reload it every 5 seconds anyway). With SQLite, or no configuration, it does nothing.
struct KeyRingAnnouncement: ParsableArguments {
    @Option(help: "Configuration file (YAML) naming the store (storage.postgres_url), to tell running instances at once.")
    var config: String?

    func announce() async {
        do {
            let storage = try StorageConfiguration(reading: try await ConfigurationValues.load(path: config))
            guard storage.postgres != nil else { return }
            var logger = Logger(label: "portcullis.keys")
            logger.logLevel = .warning
            let store = try await StateStores.open(storage, logger: logger)
            try await store.recordAccessChange(.keyRingChanged, now: Date().timeIntervalSince1970)
            await store.shutdown()
            print("told the instances on \(store.name) to reload the key ring")
        } catch {
            Terminal.warning("the key ring changed, but running instances could not be told at once (\(error)); they reload it within 5 seconds")
        }
    }
}
