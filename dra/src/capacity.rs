//! Consumable capacity: what a request takes of a device's capacity, and whether
//! the device still has it (upstream's `consumable_capacity.go`).

use crate::allocated::ConsumedCapacity;
use berth_sdk::dra::{CapacityRange, CapacityRequestPolicy, CapacityRequests, DeviceCapacity};
use berth_sdk::quantity::{Amount, Format, Quantity, QuantityError};
use std::collections::BTreeMap;

/// Why a capacity request cannot be compared with a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CapacityError {
    /// The request names a capacity the device does not have.
    Undefined,
    /// A quantity does not parse.
    Quantity(String, QuantityError),
}

fn amount(q: &Quantity, what: &str) -> Result<Amount, CapacityError> {
    q.amount()
        .map_err(|e| CapacityError::Quantity(format!("{what} {q}"), e))
}

/// Upstream's `Quantity.Value` as an i128: the value rounded away from zero.
fn whole(a: &Amount) -> i128 {
    let n = a.nanos;
    let q = n / 1_000_000_000;
    if n % 1_000_000_000 == 0 {
        q
    } else if n < 0 {
        q - 1
    } else {
        q + 1
    }
}

/// What a request takes of one capacity: the policy's default (or the whole
/// capacity) when it asks for none, otherwise what it asks for rounded up to the
/// policy's range step or next valid value.
fn consumed(
    requested: Option<&Quantity>,
    capacity: &DeviceCapacity,
) -> Result<Amount, CapacityError> {
    let Some(requested) = requested else {
        return match capacity
            .request_policy
            .as_ref()
            .and_then(|p| p.default.as_ref())
        {
            Some(d) => amount(d, "requestPolicy.default"),
            None => amount(&capacity.value, "value"),
        };
    };
    let requested = amount(requested, "capacity request")?;
    let Some(policy) = &capacity.request_policy else {
        return Ok(requested);
    };
    if let Some(range) = &policy.valid_range {
        return round_up_range(requested, range);
    }
    if !policy.valid_values.is_empty() {
        for v in &policy.valid_values {
            let v = amount(v, "requestPolicy.validValues")?;
            if requested <= v {
                return Ok(v);
            }
        }
    }
    Ok(requested)
}

fn round_up_range(requested: Amount, range: &CapacityRange) -> Result<Amount, CapacityError> {
    let min = amount(&range.min, "requestPolicy.validRange.min")?;
    if requested < min {
        return Ok(min);
    }
    let Some(step) = &range.step else {
        return Ok(requested);
    };
    let step = whole(&amount(step, "requestPolicy.validRange.step")?);
    if step == 0 {
        return Ok(requested);
    }
    let (min, req) = (whole(&min), whole(&requested));
    let added = req - min;
    let mut n = added / step;
    if added % step != 0 {
        n += 1;
    }
    Ok(Amount {
        nanos: (min + step * n) * 1_000_000_000,
        format: Format::BinarySi,
    })
}

fn violates(value: &Amount, policy: Option<&CapacityRequestPolicy>) -> Result<bool, CapacityError> {
    let Some(policy) = policy else {
        return Ok(false);
    };
    if let Some(d) = &policy.default
        && amount(d, "requestPolicy.default")? == *value
    {
        return Ok(false);
    }
    if let Some(range) = &policy.valid_range {
        if let Some(max) = &range.max
            && *value > amount(max, "requestPolicy.validRange.max")?
        {
            return Ok(true);
        }
        if let Some(step) = &range.step {
            let step = whole(&amount(step, "requestPolicy.validRange.step")?);
            let min = whole(&amount(&range.min, "requestPolicy.validRange.min")?);
            if step != 0 && (whole(value) - min) % step != 0 {
                return Ok(true);
            }
        }
        return Ok(false);
    }
    if !policy.valid_values.is_empty() {
        for v in &policy.valid_values {
            if amount(v, "requestPolicy.validValues")? == *value {
                return Ok(false);
            }
        }
        return Ok(true);
    }
    Ok(false)
}

/// Whether the device can give the request what it asks for on top of what is
/// allocated (`current`) and being allocated (`allocating`) already; an error when
/// the request names a capacity the device lacks.
pub(crate) fn fits(
    current: Option<&ConsumedCapacity>,
    requests: &CapacityRequests,
    capacities: &BTreeMap<String, DeviceCapacity>,
    allocating: Option<&ConsumedCapacity>,
) -> Result<bool, CapacityError> {
    if requests.keys().any(|name| !capacities.contains_key(name)) {
        return Err(CapacityError::Undefined);
    }
    for (name, cap) in capacities {
        let take = consumed(requests.get(name), cap)?;
        if violates(&take, cap.request_policy.as_ref())? {
            return Ok(false);
        }
        let mut total = take.nanos;
        total += current.and_then(|c| c.get(name)).copied().unwrap_or(0);
        total += allocating.and_then(|c| c.get(name)).copied().unwrap_or(0);
        if total > amount(&cap.value, "value")?.nanos {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What the request takes of each of the device's capacities.
pub(crate) fn consumed_by(
    requests: &CapacityRequests,
    capacities: &BTreeMap<String, DeviceCapacity>,
) -> Result<BTreeMap<String, Amount>, CapacityError> {
    capacities
        .iter()
        .map(|(name, cap)| Ok((name.clone(), consumed(requests.get(name), cap)?)))
        .collect()
}
