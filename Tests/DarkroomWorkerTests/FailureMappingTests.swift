import DarkroomImage
import DarkroomPipeline
import DarkroomProtocol
@testable import DarkroomWorker
import Testing

@Suite("Engine failures as DRK1 FAIL fields")
struct FailureMappingTests {
    @Test func pipelineStepsAreNumberedFromOne() {
        let failure = PipelineFailure(stage: .step(index: 2, text: "crop:600x600+0+0"),
                                      error: ImageError(.invalidArgument, "rectangle exceeds image 500x400"))
        let detail = FailureMapping.pipelineFailure(failure)
        #expect(detail.stepIndex == 2)
        #expect(detail.step == "crop:600x600+0+0")
        #expect(detail.code == "image.invalid-argument")
        #expect(detail.reason == "rectangle exceeds image 500x400")
        #expect(detail.summary == "step 2 crop:600x600+0+0: image.invalid-argument: rectangle exceeds image 500x400")
    }

    @Test func decodeAndEncodeAreStepZeroAndNameTheirStage() {
        let decode = FailureMapping.pipelineFailure(PipelineFailure(stage: .decode, error: ImageError(.corrupt, "bad Huffman code")))
        #expect(decode.stepIndex == 0)
        #expect(decode.step == "")
        #expect(decode.reason == "decode: bad Huffman code")
        #expect(decode.summary == "image.corrupt: decode: bad Huffman code")

        let encode = FailureMapping.pipelineFailure(PipelineFailure(stage: .encode("thumbnail"),
                                                                    error: ImageError(.encodeFailed, "out of memory")))
        #expect(encode.stepIndex == 0)
        #expect(encode.step == "")
        #expect(encode.code == "image.encode-failed")
        #expect(encode.reason == "encode thumbnail: out of memory")
    }

    @Test func everyMappedFailureIsValidOnTheWire() throws {
        let job = ULIDGenerator.shared.next()
        let failures = [
            FailureMapping.pipelineFailure(PipelineFailure(stage: .encode("full"), error: ImageError(.encodeFailed, "x"))),
            FailureMapping.pipelineFailure(PipelineFailure(stage: .step(index: 1, text: "grayscale"), error: ImageError(.invalidArgument, "y"))),
            FailureMapping.detail(code: FailureDetail.Code.storeUnreachable, reason: "no STORED"),
        ]
        for failure in failures {
            let message = BackendMessage.fail(Fail(jobID: job, attempt: 1, retryable: false, failure: failure))
            #expect(try BackendMessage.decode(message.frames()) == message)
        }
    }
}
