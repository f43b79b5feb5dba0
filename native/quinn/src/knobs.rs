//! A transport profile's resolved knobs (docs/transport-profiles.md) on quinn. quicbed's
//! Python side resolves and checks profiles; what quinn cannot do is refused here as well,
//! so the binary never runs a profile with a different meaning.

use std::time::Duration;

use quinn::{AckFrequencyConfig, IdleTimeout, TransportConfig, VarInt};
use serde_json::Value;

use crate::cc;

#[derive(Clone, Debug)]
pub struct Knobs {
    pub congestion_control: String,
    pub ack_every: Option<u64>,
    pub ack_decimation_after: u64,
    pub max_ack_delay: Option<f64>,
    pub ack_delay_rtt_fraction: Option<f64>,
    pub immediate_ack_on_gap: bool,
    pub pacing: bool,
    pub slow_start_exit_rtt_increase: Option<f64>,
    pub loss_time_threshold: f64,
    pub loss_packet_threshold: u32,
    /// bytes; None: 10 datagrams
    pub initial_window: Option<u64>,
    /// None: quinn's own (on)
    pub mtu_discovery: Option<bool>,
    /// packets the pacer lets leave back to back; None: quinn's own (2 ms of the window, at
    /// least 10). Set, the endpoint runs on fine timers (timer.rs)
    pub pacing_burst: Option<u64>,
}

fn field<'a>(knobs: &'a Value, name: &str) -> Result<&'a Value, String> {
    knobs.get(name).ok_or_else(|| format!("knobs: {name} missing"))
}

fn number(knobs: &Value, name: &str) -> Result<Option<f64>, String> {
    match field(knobs, name)? {
        Value::Null => Ok(None),
        value => value.as_f64().map(Some).ok_or_else(|| format!("knobs: {name} is not a number")),
    }
}

fn boolean(knobs: &Value, name: &str) -> Result<bool, String> {
    field(knobs, name)?.as_bool().ok_or_else(|| format!("knobs: {name} is not true or false"))
}

impl Knobs {
    /// The `knobs` object of a profile record (every knob, SI units).
    pub fn from_json(knobs: &Value) -> Result<Self, String> {
        let whole = |name: &str| -> Result<Option<u64>, String> {
            Ok(number(knobs, name)?.map(|value| value as u64))
        };
        let parsed = Self {
            congestion_control: field(knobs, "congestion_control")?
                .as_str()
                .ok_or("knobs: congestion_control is not a name")?
                .to_owned(),
            ack_every: whole("ack_every")?,
            ack_decimation_after: whole("ack_decimation_after")?.unwrap_or(0),
            max_ack_delay: number(knobs, "max_ack_delay")?,
            ack_delay_rtt_fraction: number(knobs, "ack_delay_rtt_fraction")?,
            immediate_ack_on_gap: boolean(knobs, "immediate_ack_on_gap")?,
            pacing: boolean(knobs, "pacing")?,
            slow_start_exit_rtt_increase: number(knobs, "slow_start_exit_rtt_increase")?,
            loss_time_threshold: number(knobs, "loss_time_threshold")?.ok_or("knobs: loss_time_threshold is null")?,
            loss_packet_threshold: whole("loss_packet_threshold")?.ok_or("knobs: loss_packet_threshold is null")? as u32,
            // newer knobs: absent from older profile records, which meant the defaults
            initial_window: knobs.get("initial_window").and_then(Value::as_u64),
            mtu_discovery: knobs.get("mtu_discovery").and_then(Value::as_bool),
            pacing_burst: knobs.get("pacing_burst").and_then(Value::as_u64),
        };
        let refused = parsed.refusals();
        if refused.is_empty() {
            Ok(parsed)
        } else {
            Err(format!("quinn cannot run these knobs: {}", refused.join("; ")))
        }
    }

    /// Knob values quinn has no way to honour, each with the reason.
    pub fn refusals(&self) -> Vec<String> {
        let mut refused = Vec::new();
        if self.ack_decimation_after != 0 {
            refused.push("ack_decimation_after: quinn requests one ACK frequency for the whole connection".into());
        }
        if self.ack_delay_rtt_fraction.is_some() {
            refused.push("ack_delay_rtt_fraction: quinn caps the requested ACK delay at the RTT, not a fraction of it".into());
        }
        if self.pacing_burst == Some(0) {
            refused.push("pacing_burst: at least 1 packet per release".into());
        }
        if self.ack_every.is_none() && (self.max_ack_delay.is_some() || self.immediate_ack_on_gap) {
            refused.push("max_ack_delay and immediate_ack_on_gap need ack_every (quinn's own ACKs take neither)".into());
        }
        if let Err(error) = cc::factory(&self.congestion_control, self.slow_start_exit_rtt_increase, self.initial_window) {
            refused.push(error);
        }
        refused
    }

    /// quinn's transport configuration for these knobs. Pacing and its burst are switches of
    /// the whole process (patches/quinn-proto-pacing-switch.patch): one endpoint runs one profile.
    pub fn transport_config(&self, idle_timeout: Duration) -> Result<TransportConfig, String> {
        quinn_proto::set_pacing_enabled(self.pacing);
        quinn_proto::set_pacing_burst(self.pacing_burst);
        let mut transport = TransportConfig::default();
        transport
            .packet_threshold(self.loss_packet_threshold)
            .time_threshold(self.loss_time_threshold as f32)
            .congestion_controller_factory(cc::factory(&self.congestion_control, self.slow_start_exit_rtt_increase,
                                                       self.initial_window)?)
            .max_idle_timeout(Some(IdleTimeout::try_from(idle_timeout).map_err(|e| format!("idle timeout: {e}"))?));
        if let Some(every) = self.ack_every {
            // the data sender asks the receiver for this ACK policy (ACK_FREQUENCY frame,
            // draft-ietf-quic-ack-frequency): ACK once more than the threshold is unacknowledged
            let mut ack = AckFrequencyConfig::default();
            ack.ack_eliciting_threshold(VarInt::from_u64(every.saturating_sub(1)).map_err(|e| e.to_string())?)
                .max_ack_delay(Some(Duration::from_secs_f64(self.max_ack_delay.unwrap_or(0.025))))
                .reordering_threshold(VarInt::from_u32(u32::from(self.immediate_ack_on_gap)));
            transport.ack_frequency_config(Some(ack));
        }
        if self.mtu_discovery == Some(false) {
            transport.mtu_discovery_config(None);
        }
        Ok(transport)
    }
}


#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn quic_knobs() -> Value {
        json!({"congestion_control": "cubic", "ack_every": 2, "ack_decimation_after": 0, "max_ack_delay": 0.025,
               "ack_delay_rtt_fraction": null, "immediate_ack_on_gap": true, "pacing": true,
               "slow_start_exit_rtt_increase": 0.125, "loss_time_threshold": 1.125, "loss_packet_threshold": 3})
    }

    #[test]
    fn pacing_is_switched_for_the_process() {
        let mut knobs = quic_knobs();
        knobs["pacing"] = json!(false);
        Knobs::from_json(&knobs).unwrap().transport_config(Duration::from_secs(5)).unwrap();
        assert!(!quinn_proto::pacing_enabled());
        Knobs::from_json(&quic_knobs()).unwrap().transport_config(Duration::from_secs(5)).unwrap();
        assert!(quinn_proto::pacing_enabled());
    }

    #[test]
    fn the_pacing_burst_is_set_for_the_process() {
        let mut knobs = quic_knobs();
        knobs["pacing_burst"] = json!(2);
        Knobs::from_json(&knobs).unwrap().transport_config(Duration::from_secs(5)).unwrap();
        assert_eq!(quinn_proto::pacing_burst(), Some(2));
        knobs["pacing_burst"] = json!(null);
        Knobs::from_json(&knobs).unwrap().transport_config(Duration::from_secs(5)).unwrap();
        assert_eq!(quinn_proto::pacing_burst(), None);
        knobs["pacing_burst"] = json!(0);
        assert!(Knobs::from_json(&knobs).unwrap_err().contains("pacing_burst"));
    }

    #[test]
    fn bquic_ack_switch_is_refused_with_reasons() {
        let mut knobs = quic_knobs();
        knobs["ack_decimation_after"] = json!(100);
        knobs["ack_delay_rtt_fraction"] = json!(0.25);
        let error = Knobs::from_json(&knobs).unwrap_err();
        assert!(error.contains("ack_decimation_after") && error.contains("ack_delay_rtt_fraction"), "{error}");
    }
}
