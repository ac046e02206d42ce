@testable import Resilience
import Testing

@Suite("BoundedDictionary: a cache's memory stays steady when it is full")
struct BoundedDictionaryTests {
    @Test("past capacity, each insertion removes the oldest one only, never the whole map")
    func evictsOldestOneAtATime() {
        var map = BoundedDictionary<Int, String>(capacity: 3)
        for key in 1...3 { map.insert("v\(key)", for: key) }
        map.insert("v4", for: 4)
        #expect(map.count == 3)
        #expect(map[1] == nil && map[2] == "v2" && map[3] == "v3" && map[4] == "v4")
        for key in 5...1_000 { map.insert("v\(key)", for: key) }
        #expect(map.count == 3)
        #expect(Set(map.keys) == [998, 999, 1_000])
    }

    @Test("an insertion returns the value it evicted for room (for a caller to let go after its lock), nothing while there is room or when it replaces a key")
    func insertionReturnsWhatItEvicted() {
        var map = BoundedDictionary<Int, String>(capacity: 2)
        #expect(map.insert("v1", for: 1) == nil && map.insert("v2", for: 2) == nil)
        #expect(map.insert("v2 again", for: 2) == nil, "a replaced key evicts nothing")
        #expect(map.insert("v3", for: 3) == "v1")
        map.removeValue(forKey: 2)
        #expect(map.insert("v4", for: 4) == nil, "a removed entry's place is free")
        #expect(map.insert("v5", for: 5) == "v3")
    }

    @Test("replacing a key's value makes it the youngest; removed and expired entries free their places")
    func replaceAndRemove() {
        var map = BoundedDictionary<String, Int>(capacity: 2)
        map.insert(1, for: "a")
        map.insert(2, for: "b")
        map.insert(10, for: "a")  // a is now younger than b
        map.insert(3, for: "c")
        #expect(map["b"] == nil && map["a"] == 10 && map["c"] == 3)
        map.removeValue(forKey: "a")
        map.insert(4, for: "d")
        #expect(map.count == 2 && map["c"] == 3 && map["d"] == 4, "a removed entry's place is used without evicting another")
        map.removeAll { $0 < 4 }
        #expect(map.count == 1 && map["d"] == 4)
    }

    @Test("the oldest entries go while they are stale, in insertion order, stopping at the first that is not; a replaced key's old place is skipped")
    func removeOldestWhileStale() {
        var map = BoundedDictionary<Int, Double>(capacity: 1_000)
        // Values are insertion times; entries older than 30 s are stale.
        for key in 0..<100 { map.insert(Double(key), for: key) }
        map.insert(95, for: 3)  // key 3 replaced: now among the youngest
        map.removeOldest { 100 - $0 > 30 }  // stale: inserted before time 70
        #expect(map.count == 31, "70 stale entries gone, key 3 (replaced at 95) kept")
        #expect(map[69] == nil && map[70] == 70 && map[3] == 95)
        map.removeOldest { _ in false }
        #expect(map.count == 31)
        // A stale entry behind a live one stays until the live one goes.
        map.insert(200, for: 500)
        map.insert(10, for: 501)
        map.removeOldest { 220 - $0 > 30 }
        #expect(map.count == 2 && map[500] == 200 && map[501] == 10)
        // The drained queue does not keep evicted keys referenced.
        for round in 0..<100 {
            for key in 0..<100 { map.insert(Double(round * 100 + key), for: 10_000 + key) }
            map.removeOldest { Double(round * 100 + 100) - $0 > 50 }
        }
        #expect(map.queuedKeys <= 2 * map.count + 64)
    }

    @Test("keys replaced a million times keep one entry each, and the oldest insertions still go first")
    func replacementsDoNotGrow() {
        var map = BoundedDictionary<Int, Int>(capacity: 10)
        for value in 0..<1_000_000 { map.insert(value, for: value % 5) }
        #expect(map.count == 5)
        #expect(map[4] == 999_999)
        for key in 100..<110 { map.insert(key, for: key) }
        #expect(map.count == 10)
        #expect(Set(map.keys) == Set(100..<110), "the oldest (the replaced keys) went first")
    }

    /// A key whose release can be observed.
    final class ObservedKey: Hashable {
        let id: Int
        init(_ id: Int) { self.id = id }
        static func == (a: ObservedKey, b: ObservedKey) -> Bool { a.id == b.id }
        func hash(into hasher: inout Hasher) { hasher.combine(id) }
    }

    @Test("a full map evicting one key per insertion for ever releases every evicted key: nothing grows")
    func evictedKeysAreReleased() {
        var map = BoundedDictionary<ObservedKey, Int>(capacity: 100)
        weak var first: ObservedKey?
        var evicted: [() -> ObservedKey?] = []
        for id in 0..<100_000 {
            let key = ObservedKey(id)
            if id == 0 { first = key }
            if id % 1_000 == 1 { evicted.append { [weak key] in key } }
            map.insert(id, for: key)
        }
        #expect(map.count == 100)
        #expect(first == nil, "the first key, evicted long ago, is still referenced")
        #expect(evicted.dropLast().allSatisfy { $0() == nil }, "evicted keys are still referenced")
        #expect(map.queuedKeys <= 2 * map.count + 64, "the insertion queue holds \(map.queuedKeys) keys for \(map.count) entries")
    }
}
