/// A dictionary of at most `capacity` entries: an insertion past it removes the
/// oldest insertion first.
///
/// Why: a cache that empties itself all at once when full makes memory and its
/// hit rate swing (the 60-minute soak saw RSS oscillate by half); removing one
/// old entry per new one keeps both steady. Replacing a key's value makes it
/// the youngest. Not synchronised: keep it inside a `Mutex`.
///
/// Inlinable, with structs rather than tuples inside: unspecialised, every insertion looked
/// up tuple metadata at run time, about 27 us a request when each request missed a cache of
/// 10,000 (100,000 people round robin).
public struct BoundedDictionary<Key: Hashable, Value> {
    /// A value and the stamp of its insertion.
    @usableFromInline struct Entry {
        @usableFromInline var value: Value
        @usableFromInline var stamp: UInt64
        @inlinable init(value: Value, stamp: UInt64) { (self.value, self.stamp) = (value, stamp) }
    }
    /// A key in the insertion queue, with the stamp it was inserted under.
    @usableFromInline struct Queued {
        @usableFromInline var key: Key
        @usableFromInline var stamp: UInt64
        @inlinable init(key: Key, stamp: UInt64) { (self.key, self.stamp) = (key, stamp) }
    }

    public let capacity: Int
    @usableFromInline var entries: [Key: Entry] = [:]
    /// Insertions, oldest first from `head`; an element whose stamp no longer matches its
    /// entry (replaced or removed since) is skipped, and the queue is compacted when such
    /// elements outnumber the live ones.
    @usableFromInline var order: [Queued] = []
    @usableFromInline var head = 0
    @usableFromInline var nextStamp: UInt64 = 0

    /// - Parameter capacity: at least 1 (a smaller value is taken as 1).
    @inlinable
    public init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    @inlinable public var count: Int { entries.count }
    /// The keys, in no order.
    @inlinable public var keys: [Key] { Array(entries.keys) }

    @inlinable
    public subscript(key: Key) -> Value? {
        entries[key]?.value
    }

    /// Sets `value` for `key` (the youngest entry), first removing the oldest while full.
    ///
    /// - Returns: the value removed to make room (the last, when several were), so that a caller
    ///   holding a lock can let it go after unlocking: freeing an evicted value (a verified caller's
    ///   claims, say) under the lock kept the other event loop waiting on every cache miss.
    @inlinable @discardableResult
    public mutating func insert(_ value: Value, for key: Key) -> Value? {
        var evicted: Value?
        if entries[key] == nil {
            while entries.count >= capacity, head < order.count {
                let oldest = order[head]
                head += 1
                if let index = entries.index(forKey: oldest.key), entries[index].value.stamp == oldest.stamp {
                    evicted = entries.remove(at: index).value.value
                }
            }
        }
        nextStamp &+= 1
        entries[key] = Entry(value: value, stamp: nextStamp)
        order.append(Queued(key: key, stamp: nextStamp))
        compactIfSparse()
        return evicted
    }

    @inlinable
    public mutating func removeValue(forKey key: Key) {
        entries[key] = nil
    }

    /// Removes the oldest entries, in insertion order, while the oldest is `isStale`; stops at the
    /// first that is not.
    ///
    /// For a cache whose entries age from their insertion: its expired entries are its oldest,
    /// so calling this on each insertion keeps it holding what is live rather than filling to
    /// `capacity` with what has expired (the 60-minute soak's RSS rose for 20 minutes as two
    /// caches of 10,000 filled with expired tokens and assertions, then stayed flat).
    @inlinable
    public mutating func removeOldest(while isStale: (Value) -> Bool) {
        while head < order.count {
            let oldest = order[head]
            if let entry = entries[oldest.key], entry.stamp == oldest.stamp {
                guard isStale(entry.value) else { break }
                entries[oldest.key] = nil
            }
            head += 1
        }
        compactIfSparse()
    }

    /// Removes every entry whose value matches `shouldRemove` (expired ones, say).
    @inlinable
    public mutating func removeAll(where shouldRemove: (Value) -> Bool) {
        entries = entries.filter { !shouldRemove($0.value.value) }
        compactIfSparse()
    }

    /// Keeps the queue within twice the live entries (plus a little), so replaced keys cost no memory
    /// over time, and drops the consumed front once it is half the queue: an evicted key must not
    /// stay referenced by the queue (a full cache evicts one per insertion for ever; the soak saw
    /// every access token it had ever cached kept this way, about 1 MB a minute).
    @inlinable
    mutating func compactIfSparse() {
        let queued = order.count - head
        if queued > 2 * entries.count + 64 {
            order = order[head...].filter { entries[$0.key]?.stamp == $0.stamp }
            head = 0
        } else if head > 64, head >= queued {
            order.removeFirst(head)
            head = 0
        }
    }

    /// Keys the insertion queue references, live or not (at most about twice `count`, plus a little).
    @inlinable var queuedKeys: Int { order.count }
}

extension BoundedDictionary: Sendable where Key: Sendable, Value: Sendable {}
extension BoundedDictionary.Entry: Sendable where Key: Sendable, Value: Sendable {}
extension BoundedDictionary.Queued: Sendable where Key: Sendable, Value: Sendable {}
