/// A first-in, first-out queue of core inputs: taken from the front
/// without moving the rest, compacted once the taken part is large.
struct InputQueue {
    private var items: [CoreInput] = []
    private var start = 0

    var count: Int { items.count - start }

    mutating func append(_ input: CoreInput) { items.append(input) }

    /// Takes the first input, if any.
    mutating func popFirst() -> CoreInput? {
        guard start < items.count else { return nil }
        start += 1
        return items[start - 1]
    }

    /// Puts `inputs` before the rest, in their order.
    mutating func prepend(_ inputs: [CoreInput]) {
        guard !inputs.isEmpty else { return }
        items.replaceSubrange(0..<start, with: inputs)
        start = 0
    }

    /// Frees the taken part when it is all of the queue or most of a large one.
    mutating func compact() {
        if start == items.count {
            items.removeAll(keepingCapacity: true)
            start = 0
        } else if start > 4_096, start * 2 > items.count {
            items.removeFirst(start)
            start = 0
        }
    }
}
