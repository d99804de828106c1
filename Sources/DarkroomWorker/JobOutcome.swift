import DarkroomImage
import DarkroomPipeline
import DarkroomProtocol

/// What a processing thread hands back to the service thread for one job.
enum JobOutcome: Sendable {
    /// The pipeline ran; the outputs still have to be stored. `pipeline` is
    /// the canonical text that goes into the record.
    case processed(JobOutput, pipeline: String)
    /// The job failed before anything could be stored.
    case failed(FailureDetail, retryable: Bool)
    /// Its `CancellationFlag` stopped the run in this stage (the service
    /// thread set it: a CANCEL-JOB or the time limit).
    case stopped(Stage)
}

/// Turning engine failures into the FAIL fields of DRK1.
enum FailureMapping {
    /// The pipeline text did not parse: `pipeline.invalid`, not in a step.
    static func invalidPipeline(_ error: PipelineSyntaxError) -> FailureDetail {
        detail(stepIndex: 0, step: "", code: FailureDetail.Code.invalidPipeline, reason: error.summary)
    }

    /// A failure of the compound operation. The wire numbers pipeline steps
    /// from 1, as `Stage` does, and uses 0 for anything outside a step
    /// (protocol section 6.1): decode and encode failures carry 0 and name
    /// their stage at the start of the reason instead.
    static func pipelineFailure(_ failure: PipelineFailure) -> FailureDetail {
        let code = failure.error.code.failureCode
        switch failure.stage {
        case let .step(index, text):
            return detail(stepIndex: Int32(clamping: max(index, 1)), step: text, code: code, reason: failure.error.message)
        case .decode, .encode:
            return detail(stepIndex: 0, step: "", code: code, reason: "\(failure.stage): \(failure.error.message)")
        }
    }

    /// The time limit stopped the run in `stage`: `job.timeout`, in the step
    /// it was in, or with the stage at the start of the reason.
    static func timeout(in stage: Stage, limit: JobTimeLimit) -> FailureDetail {
        let reason = "stopped: ran longer than \(limit.phrase)"
        switch stage {
        case let .step(index, text):
            return detail(stepIndex: Int32(clamping: max(index, 1)), step: text, code: FailureDetail.Code.timeout, reason: reason)
        case .decode, .encode:
            return detail(code: FailureDetail.Code.timeout, reason: "\(stage): \(reason)")
        }
    }

    /// The time limit stopped the run, but its thread had not come back
    /// `grace` later: `job.timeout` without the stage it was in.
    static func timeout(limit: JobTimeLimit, unstoppedFor grace: Duration) -> FailureDetail {
        detail(code: FailureDetail.Code.timeout,
               reason: "ran longer than \(limit.phrase) and did not stop within \(grace.components.seconds) s")
    }

    /// A FAIL that is not about the image (store, shutdown, internal).
    static func detail(stepIndex: Int32 = 0, step: String = "", code: String, reason: String) -> FailureDetail {
        FailureDetail(
            stepIndex: stepIndex,
            step: Wire.line(step, maxBytes: Wire.Limit.stepBytes),
            code: Wire.line(code, maxBytes: Wire.Limit.errorCodeBytes),
            reason: Wire.line(reason, maxBytes: Wire.Limit.reasonBytes)
        )
    }
}
