# Sidekiq peer for bench/system.sh.
#
# As a library (`sidekiq -r ./sidekiq_bench.rb`): defines the job, which
# INCRs one Redis counter, so the driver knows exactly when every job ran.
# Per-job log lines are turned off (warn level), as the Celery peer runs at
# WARNING: the peer is measured at its fastest.
#
# As a script (`ruby sidekiq_bench.rb JOBS PROCESSES`): waits until
# PROCESSES Sidekiq processes have registered, enqueues JOBS jobs with one
# Sidekiq::Client.push_bulk, polls the counter until it reaches JOBS and
# prints one JSON line: jobs, seconds (push_bulk start to the last INCR
# seen), enqueueSeconds, jobsPerSecond.
#
# Redis comes from REDIS_URL, as Sidekiq itself reads it.
require "json"
require "sidekiq"

DARKROOM_BENCH_COUNTER = "darkroom-bench:done"

# Debian pairs Sidekiq 6.4 with redis-rb 4.8, which prints a deprecation
# warning on nearly every fetch (BRPOP's positional timeout, SADD): two
# lines of stderr per job that a matched install would not write.
Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)

Sidekiq.configure_server do |config|
  config.logger.level = Logger::WARN
end

class DarkroomBenchIncr
  include Sidekiq::Worker
  sidekiq_options retry: false

  def perform(_n)
    Sidekiq.redis { |r| r.incr(DARKROOM_BENCH_COUNTER) }
  end
end

if $PROGRAM_NAME == __FILE__
  require "sidekiq/api"
  Sidekiq.logger.level = Logger::WARN
  jobs = Integer(ARGV.fetch(0, "20000"))
  processes = Integer(ARGV.fetch(1, "2"))
  clock = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }

  start = clock.call
  until Sidekiq::ProcessSet.new.size >= processes
    if clock.call - start > 60
      warn "sidekiq_bench: only #{Sidekiq::ProcessSet.new.size} of #{processes} Sidekiq processes registered after 60 s"
      exit 1
    end
    sleep 0.1
  end
  Sidekiq.redis { |r| r.del(DARKROOM_BENCH_COUNTER) }
  args = Array.new(jobs) { |i| [i] }

  t0 = clock.call
  Sidekiq::Client.push_bulk("class" => DarkroomBenchIncr, "args" => args)
  enqueued = clock.call
  done = 0
  while done < jobs
    if clock.call - t0 > 600
      warn "sidekiq_bench: #{done} of #{jobs} jobs done after 600 s"
      exit 1
    end
    sleep 0.002
    done = Sidekiq.redis { |r| r.get(DARKROOM_BENCH_COUNTER) }.to_i
  end
  t1 = clock.call
  puts JSON.generate(
    "jobs" => jobs,
    "seconds" => (t1 - t0).round(3),
    "enqueueSeconds" => (enqueued - t0).round(3),
    "jobsPerSecond" => (jobs / (t1 - t0)).round(1)
  )
end
