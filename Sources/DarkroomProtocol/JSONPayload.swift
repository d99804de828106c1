import Foundation

/// The JSON frames of DRK1 (STATUS-REPLY, DEAD-LIST-REPLY, LIST-REPLY,
/// GET-REPLY metadata, STATS-REPLY) are UTF-8 JSON. Senders in this module
/// write compact JSON with sorted keys, so the same value always gives the
/// same bytes; receivers accept any key order and whitespace and ignore keys
/// they do not know.
public enum JSONPayload {
    public static func encode<T: Encodable>(_ value: T) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding fails only for non-finite doubles, which the payload types
        // never hold (rates are finite by construction); "null" keeps the
        // message well-formed if one slips through.
        guard let data = try? encoder.encode(value) else { return Array("null".utf8) }
        return [UInt8](data)
    }

    public static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        try JSONDecoder().decode(type, from: Data(bytes))
    }
}
