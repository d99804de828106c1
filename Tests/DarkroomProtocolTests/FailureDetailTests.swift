import DarkroomProtocol
import Testing

@Suite struct FailureDetailTests {
    @Test func oneLineWithAndWithoutTheCode() {
        let inStep = FailureDetail(stepIndex: 2, step: "crop:600x600+0+0", code: "image.invalid-argument", reason: "rectangle exceeds image 500x400")
        #expect(inStep.summary == "step 2 crop:600x600+0+0: image.invalid-argument: rectangle exceeds image 500x400")
        #expect(inStep.text(withCode: false) == "step 2 crop:600x600+0+0: rectangle exceeds image 500x400")
        let outsideSteps = FailureDetail(stepIndex: 0, step: "", code: "worker.lost", reason: "the worker stopped answering")
        #expect(outsideSteps.summary == "worker.lost: the worker stopped answering")
        #expect(outsideSteps.text(withCode: false) == "the worker stopped answering")
    }
}
