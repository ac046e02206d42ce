import Testing
import TrafficCop

@Suite("Client addresses and trusted proxies")
struct ClientAddressTests {
    @Test("networks parse IPv4 and IPv6 with prefixes and refuse junk")
    func networks() {
        #expect(IPNetwork("10.0.0.0/8")?.contains(IPNetwork.parseAddress("10.200.3.4")!) == true)
        #expect(IPNetwork("10.0.0.0/8")?.contains(IPNetwork.parseAddress("11.0.0.1")!) == false)
        #expect(IPNetwork("::1")?.contains(IPNetwork.parseAddress("::1")!) == true)
        #expect(IPNetwork("fd00::/8")?.contains(IPNetwork.parseAddress("fd12::5")!) == true)
        #expect(IPNetwork("192.168.1.7")?.prefixLength == 32)
        #expect(IPNetwork("::ffff:127.0.0.1")?.bytes == [127, 0, 0, 1])
        for junk in ["", "10.0.0.0/33", "10.0.0/8", "example.com", "1.2.3.4/-1", "::1/129", "1.2.3.4/8/1"] {
            #expect(IPNetwork(junk) == nil, "\(junk)")
        }
    }

    @Test("the socket peer is the client unless it is a trusted proxy; X-Forwarded-For is read from the right")
    func resolution() {
        let none = ClientAddressResolver()
        #expect(none.clientAddress(peer: "198.51.100.7", forwardedFor: ["203.0.113.9"]) == "198.51.100.7")
        let resolver = ClientAddressResolver(trustedProxies: [IPNetwork("10.0.0.0/8")!])
        #expect(resolver.clientAddress(peer: "198.51.100.7", forwardedFor: ["203.0.113.9"]) == "198.51.100.7")
        #expect(resolver.clientAddress(peer: "10.0.0.2", forwardedFor: ["203.0.113.9"]) == "203.0.113.9")
        // A client-supplied left part cannot override what the trusted proxy appended.
        #expect(resolver.clientAddress(peer: "10.0.0.2", forwardedFor: ["1.1.1.1, 203.0.113.9"]) == "203.0.113.9")
        #expect(resolver.clientAddress(peer: "10.0.0.2", forwardedFor: ["203.0.113.9", "10.0.0.5"]) == "203.0.113.9")
        #expect(resolver.clientAddress(peer: "10.0.0.2", forwardedFor: ["garbage"]) == "10.0.0.2")
        #expect(resolver.clientAddress(peer: "10.0.0.2", forwardedFor: []) == "10.0.0.2")
    }

    @Test("per-client rate limits count an IPv6 client by its /64 (in any spelling) and an IPv4 or IPv4-mapped one by its address")
    func rateLimitKeys() {
        let key = ClientAddressResolver.rateLimitKey
        #expect(key("2001:db8:1:2:aaaa::1") == "2001:db8:1:2::/64")
        #expect(key("2001:0DB8:0001:0002:ffff:ffff:ffff:ffff") == "2001:db8:1:2::/64")
        #expect(key("2001:db8:1:3::1") == "2001:db8:1:3::/64")
        #expect(key("::ffff:198.51.100.7") == "198.51.100.7" && key("64:ff9b::c633:6407") == "198.51.100.7" && key("64:ff9b::c633:6408") != key("64:ff9b::c633:6407"))
        #expect(key("198.51.100.7") == "198.51.100.7")
        #expect(key("198.51.100.8") != key("198.51.100.7"))
        #expect(key("unknown") == "unknown")
    }
}

@Suite("Session intents against the execution contract")
struct SessionIntentTests {
    let validator = SessionIntentValidator(contract: ExecutionContract(maximumSessionsPerUser: 2, maximumSocketsPerSession: 1, anonymousIntents: ["echo"]))
    let alice = Principal(userID: "usr_alice", tenantID: "acme")

    func refusal(_ intent: SessionIntent) -> AdmissionRefusal? {
        do {
            _ = try validator.admit(intent)
            return nil
        } catch {
            return error
        }
    }

    @Test("an anonymous session is created by the server only: a client-supplied id is refused")
    func createAnonymous() {
        #expect(refusal(SessionIntent(.createAnonymous)) == nil)
        #expect(refusal(SessionIntent(.createAnonymous, sessionID: "ses_x"))?.code == "invalid_request")
    }

    @Test("owned sessions and upgrades need a principal and carry the contract's sessions per user to where the count lives")
    func createOwned() throws {
        #expect(refusal(SessionIntent(.createOwned))?.kind == .identityRequired)
        #expect(try validator.admit(SessionIntent(.createOwned, principal: alice)).maximumLiveSessions == 2)
        #expect(try validator.admit(SessionIntent(.upgrade, principal: alice, sessionID: "ses_x")).maximumLiveSessions == 2)
        #expect(try validator.admit(SessionIntent(.read, principal: alice, sessionID: "ses_x")).maximumLiveSessions == nil)
    }

    @Test("upgrade, revoke and sockets need a principal and a session; sockets stay within sockets per session")
    func sessionOperations() {
        for operation in [SessionIntent.Operation.upgrade, .revoke, .openSocket] {
            #expect(refusal(SessionIntent(operation, sessionID: "ses_x"))?.kind == .identityRequired)
            #expect(refusal(SessionIntent(operation, principal: alice))?.code == "session_missing")
        }
        #expect((try? validator.admit(SessionIntent(.openSocket, principal: alice, sessionID: "ses_x")))?.maximumSockets == 1)
        #expect(validator.socketLimitReached().kind == .limitReached)
        #expect(validator.socketLimitReached().code == "rate_limited")
        #expect(refusal(SessionIntent(.read, sessionID: "ses_x")) == nil)
    }

    @Test("anonymous sessions run only the contract's intents; a principal with an empty tenant is refused")
    func intents() {
        #expect(refusal(SessionIntent(.runIntent, sessionID: "ses_x", intentType: "echo")) == nil)
        #expect(refusal(SessionIntent(.runIntent, sessionID: "ses_x", intentType: "session.set_metadata"))?.kind == .notAllowed)
        #expect(refusal(SessionIntent(.runIntent, principal: alice, sessionID: "ses_x", intentType: "session.set_metadata")) == nil)
        #expect(refusal(SessionIntent(.runIntent, principal: alice, sessionID: "ses_x"))?.code == "invalid_request")
        #expect(refusal(SessionIntent(.readExecution, executionID: "exe_x"))?.kind == .identityRequired)
        #expect(refusal(SessionIntent(.readExecution, principal: alice))?.code == "invalid_request")
        #expect(refusal(SessionIntent(.readExecution, principal: alice, executionID: "exe_x")) == nil)
        #expect(refusal(SessionIntent(.read, principal: Principal(userID: "u", tenantID: ""), sessionID: "ses_x"))?.kind == .identityRequired)
    }
}
