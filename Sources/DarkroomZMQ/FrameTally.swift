import Synchronization

/// What one owner has handed over to be sent without a copy and libzmq has
/// not yet released: mappings for `MappedFile`, bytes for `CopiedFrame`.
/// A server bounds its own tally (the broker its mapped inputs, the storage
/// node its mapped images and its copied ones), so that in one process, as
/// in `darkroom up`, one role's unread replies never count against
/// another's bound.
///
/// Threading: `Sendable`, an atomic. libzmq's I/O thread lowers it as sent
/// frames are released; any thread may read it.
public final class FrameTally: Sendable {
    private let value = Atomic<Int>(0)

    public init() {}

    /// Made and not yet released, here or inside libzmq's queues.
    public var current: Int { value.load(ordering: .relaxed) }

    func add(_ amount: Int) { value.add(amount, ordering: .relaxed) }
    func subtract(_ amount: Int) { value.subtract(amount, ordering: .relaxed) }
}
