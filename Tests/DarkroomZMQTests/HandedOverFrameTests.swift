import Foundation
import Testing
import DarkroomZMQ

/// Frames sent without a copy (a mapped file, a copied image) are counted
/// on their owner's tally from the moment they are made until libzmq has
/// released them, whichever way they go: sent and read, refused, or never
/// sent. Each owner's tally counts only its own, so two servers in one
/// process (the broker and the storage node of `darkroom up`) never spend
/// each other's bound.
@Suite struct HandedOverFrameTests {
    /// Waits for libzmq's I/O thread to release what has left.
    private func settles(_ tally: FrameTally, to value: Int) -> Bool {
        for _ in 0..<1_000 where tally.current != value { Thread.sleep(forTimeInterval: 0.002) }
        return tally.current == value
    }

    private func file(_ bytes: [UInt8]) throws -> String {
        let path = NSTemporaryDirectory() + "handed-over-\(UUID().uuidString)"
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        return path
    }

    @Test func eachOwnerCountsOnlyItsOwnUntilItsFramesAreRead() throws {
        let context = try Context()
        let receiver = try Socket.make(context, .pull)
        let endpoint = try receiver.bindLoopback()
        try receiver.setReceiveTimeout(milliseconds: 20_000)
        let sender = try Socket.make(context, .push)
        try sender.connect(endpoint)

        let fileBytes = (0..<5_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let copyBytes = (0..<3_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        let path = try file(fileBytes)
        defer { try? FileManager.default.removeItem(atPath: path) }

        let mappings = FrameTally()
        let copies = FrameTally()
        let other = FrameTally()
        let mapped = try (0..<3).map { _ in try MappedFile(path: path, maxBytes: 1 << 20, tally: mappings) }
        let copied = (0..<2).map { _ in CopiedFrame(copying: copyBytes, tally: copies) }
        #expect(mappings.current == 3)
        #expect(copies.current == 2 * copyBytes.count)
        #expect(other.current == 0)

        for file in mapped { try sender.send([[1], []], file: file, at: 1) }
        for copy in copied { try sender.send([[2], [], [9]], copied: copy, at: 1) }
        for _ in 0..<3 {
            let message = try #require(try receiver.receive())
            #expect(message == [[1], fileBytes])
        }
        for _ in 0..<2 {
            let message = try #require(try receiver.receive())
            #expect(message == [[2], copyBytes, [9]])
        }
        #expect(settles(mappings, to: 0), "\(mappings.current) mapping(s) still counted after every frame was read")
        #expect(settles(copies, to: 0), "\(copies.current) copied byte(s) still counted after every frame was read")
        // Sent, a frame is no longer the sender's to read.
        #expect(mapped[0].withUnsafeBytes { $0.count } == 0)
        #expect(other.current == 0)
    }

    @Test func framesNeverSentOrRefusedAreReleasedOnce() throws {
        let context = try Context()
        let path = try file([1, 2, 3, 4])
        defer { try? FileManager.default.removeItem(atPath: path) }
        let tally = FrameTally()
        do {
            let file = try MappedFile(path: path, maxBytes: 16, tally: tally)
            let copy = CopiedFrame(copying: [5, 6, 7], tally: tally)
            #expect(tally.current == 1 + 3)
            #expect(file.withUnsafeBytes { Array($0) } == [1, 2, 3, 4])
            _ = copy
        }
        #expect(tally.current == 0, "frames made and never sent were not released")

        // A ROUTER drops a message for a peer it does not know: libzmq
        // releases the frame it was given.
        let router = try Socket.make(context, .router)
        _ = try router.bindLoopback()
        let dropped = CopiedFrame(copying: [8, 9], tally: tally)
        #expect(tally.current == 2)
        try router.send([[0x41], []], copied: dropped, at: 1, dontWait: true)
        #expect(settles(tally, to: 0), "a dropped frame is still counted")

        // One that says so refuses the first frame: nothing was handed
        // over, the copy is still the sender's, and released with it.
        let mandatory = try Socket.make(context, .router)
        try mandatory.setRouterMandatory(true)
        _ = try mandatory.bindLoopback()
        do {
            let refused = CopiedFrame(copying: [1, 2, 3], tally: tally)
            #expect(throws: ZMQError.self) { try mandatory.send([[0x41], []], copied: refused, at: 1, dontWait: true) }
            #expect(tally.current == 3)
            #expect(refused.count == 3)
        }
        #expect(tally.current == 0, "a refused frame was not released with its owner")

        // Past the limit, nothing is mapped and nothing counted.
        #expect(throws: MappedFile.Failure.self) { try MappedFile(path: path, maxBytes: 3, tally: tally) }
        #expect(tally.current == 0)
    }
}
