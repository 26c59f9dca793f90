//! Client-side rate limiting as client-go's token bucket: `qps` tokens a second, at
//! most `burst` saved up. kube-scheduler's `clientConnection.qps` and `burst` set it.

use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// A token bucket shared by the requests of one client.
#[derive(Debug)]
pub struct RateLimiter {
    qps: f64,
    burst: f64,
    state: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

impl RateLimiter {
    /// A bucket that starts full. A `qps` of zero or less means no limit.
    pub fn new(qps: f32, burst: u32) -> Self {
        RateLimiter {
            qps: f64::from(qps),
            burst: f64::from(burst.max(1)),
            state: Mutex::new(Bucket {
                tokens: f64::from(burst.max(1)),
                last: Instant::now(),
            }),
        }
    }

    /// Takes a token, reserving one from the future if none is left, and says how long
    /// to wait before using it.
    fn reserve(&self) -> Duration {
        if self.qps <= 0.0 {
            return Duration::ZERO;
        }
        let mut b = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let elapsed = now.duration_since(b.last).as_secs_f64();
        b.last = now;
        b.tokens = (b.tokens + elapsed * self.qps).min(self.burst);
        b.tokens -= 1.0;
        if b.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-b.tokens / self.qps)
        }
    }

    /// Waits for a token.
    pub async fn acquire(&self) {
        let wait = self.reserve();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn burst_then_qps() {
        let l = RateLimiter::new(10.0, 5);
        let start = Instant::now();
        for _ in 0..5 {
            l.acquire().await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO, "the burst is free");
        for _ in 0..10 {
            l.acquire().await;
        }
        // Ten more at 10/s take one second.
        let took = start.elapsed().as_secs_f64();
        assert!((0.99..1.01).contains(&took), "took {took}");
    }

    #[tokio::test(start_paused = true)]
    async fn zero_qps_is_unlimited() {
        let l = RateLimiter::new(0.0, 1);
        let start = Instant::now();
        for _ in 0..1000 {
            l.acquire().await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
    }
}
