import Resilience
import Testing

@Suite("A dependency's circuit: refused at once while open or full, closed only by a probe")
struct DependencyCircuitTests {
    struct Unreachable: Error {}

    @Test("a closed circuit admits callers up to its bound on waiters, then refuses the next as busy; a caller leaving makes room")
    func waitersAreBounded() throws {
        let circuit = DependencyCircuit(name: "store", maximumWaiters: 2)
        try circuit.enter()
        try circuit.enter()
        #expect(throws: DependencyCircuit.Refusal(dependency: "store", reason: .busy, retryAfter: 1)) { try circuit.enter() }
        circuit.leave()
        try circuit.enter()
        #expect(circuit.snapshot.waiters == 2 && circuit.snapshot.refusedFast == 1)
    }

    @Test("an outage opens it (reported once), every caller is then refused at once, and a recovery closes it")
    func outageOpensRecoveryCloses() async throws {
        let circuit = DependencyCircuit(name: "runtime")
        await #expect(throws: Unreachable.self) {
            try await circuit.call(isOutage: { $0 is Unreachable ? "the runtime cannot be reached" : nil }) { throw Unreachable() }
        }
        #expect(circuit.isOpen && circuit.snapshot.detail == "the runtime cannot be reached")
        #expect(!circuit.recordOutage("again"), "a second outage while open is not a new one")
        #expect(throws: DependencyCircuit.Refusal(dependency: "runtime", reason: .open, retryAfter: 5)) { try circuit.enter() }
        #expect(circuit.snapshot.waiters == 0, "a refused caller holds no place")
        #expect(circuit.recordRecovery())
        #expect(!circuit.isOpen && circuit.snapshot.detail == nil)
        #expect(try await circuit.call(isOutage: { _ in "x" }) { 42 } == 42)
    }

    @Test("an error that is not an outage leaves the circuit closed")
    func otherErrorsDoNotOpen() async {
        struct Refused: Error {}
        let circuit = DependencyCircuit(name: "store")
        await #expect(throws: Refused.self) { try await circuit.call(isOutage: { _ in nil }) { throw Refused() } }
        #expect(!circuit.isOpen && circuit.snapshot.waiters == 0)
    }

    @Test("a refusal's message names the dependency and when to try again, never an address")
    func refusalMessages() {
        #expect(DependencyCircuit.Refusal(dependency: "store", reason: .open, retryAfter: 5).message.contains("the store is down"))
        #expect(DependencyCircuit.Refusal(dependency: "runtime", reason: .busy, retryAfter: 1).message.contains("too many requests are waiting on the runtime"))
    }

    @Test("calls waiting on a dependency are answered when its circuit opens (every waiter, with the detail); a waiter cancelled first gets nothing; an open circuit answers at once")
    func waitersAreAnsweredWhenItOpens() async throws {
        let circuit = DependencyCircuit(name: "store")
        let waiters = (0..<20).map { _ in Task { await circuit.untilOpen() } }
        let cancelled = Task { await circuit.untilOpen() }
        try await Task.sleep(for: .milliseconds(50))
        cancelled.cancel()
        #expect(await cancelled.value == nil)
        circuit.recordOutage("PostgreSQL at db:5432 cannot be reached")
        for waiter in waiters { #expect(await waiter.value == "PostgreSQL at db:5432 cannot be reached") }
        #expect(await circuit.untilOpen() == "PostgreSQL at db:5432 cannot be reached")
        // Closed again: a new waiter waits for the next outage, not the last one.
        circuit.recordRecovery()
        let next = Task { await circuit.untilOpen() }
        try await Task.sleep(for: .milliseconds(50))
        circuit.recordOutage("again")
        #expect(await next.value == "again")
    }
}
