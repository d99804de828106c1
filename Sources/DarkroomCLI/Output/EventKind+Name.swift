import DarkroomProtocol

extension EventKind {
    /// The kind named as EVENT's JSON and JOB-INFO write it (and as
    /// `watch --kind` takes it).
    init?(name: String) {
        guard let kind = EventKind.allCases.first(where: { $0.description == name }) else { return nil }
        self = kind
    }
}
