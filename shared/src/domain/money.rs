//! Exact money. Fees are decimal strings on the wire (`UpfrontFee`), and they are spent for
//! real, so they never pass through a float.

use std::fmt;
use std::str::FromStr;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// An ISO 4217 currency code: three upper-case ASCII letters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Currency([u8; 3]);

impl Currency {
    pub const USD: Currency = Currency(*b"USD");

    pub fn as_str(&self) -> &str {
        // Constructed only from ASCII letters, so this cannot fail.
        std::str::from_utf8(&self.0).unwrap_or("???")
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoneyError {
    #[error("currency code {0:?} is not three upper-case letters (e.g. \"USD\")")]
    BadCurrency(String),
    #[error("amount {0:?} is not a decimal number (e.g. \"1234.50\")")]
    NotADecimal(String),
    #[error("amount {0:?} is negative")]
    Negative(String),
    #[error("cannot combine {0} and {1}: different currencies")]
    CurrencyMismatch(Currency, Currency),
}

impl FromStr for Currency {
    type Err = MoneyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let b = s.as_bytes();
        if b.len() == 3 && b.iter().all(u8::is_ascii_uppercase) {
            Ok(Currency([b[0], b[1], b[2]]))
        } else {
            Err(MoneyError::BadCurrency(s.to_string()))
        }
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Currency {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Currency {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Parses a non-negative decimal amount as EC2 writes it ("12345", "0.10", " 4617.60 ").
/// Scientific notation, signs other than a leading '-', NaN and empty strings are rejected.
pub fn parse_amount(s: &str) -> Result<Decimal, MoneyError> {
    let t = s.trim();
    if t.is_empty() || !t.bytes().all(|c| c.is_ascii_digit() || c == b'.' || c == b'-') {
        return Err(MoneyError::NotADecimal(s.to_string()));
    }
    let d = Decimal::from_str_exact(t).map_err(|_| MoneyError::NotADecimal(s.to_string()))?;
    if d.is_sign_negative() && !d.is_zero() {
        return Err(MoneyError::Negative(s.to_string()));
    }
    Ok(d.normalize_keep_scale())
}

trait NormalizeKeepScale {
    fn normalize_keep_scale(self) -> Self;
}
impl NormalizeKeepScale for Decimal {
    /// "-0" parses as negative zero; make it plain zero so equality and display behave.
    fn normalize_keep_scale(self) -> Self {
        if self.is_zero() { Decimal::ZERO } else { self }
    }
}

/// An exact, non-negative amount in one currency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Money {
    #[serde(with = "rust_decimal::serde::str")]
    amount: Decimal,
    currency: Currency,
}

impl Money {
    pub fn new(amount: Decimal, currency: Currency) -> Result<Self, MoneyError> {
        if amount.is_sign_negative() && !amount.is_zero() {
            return Err(MoneyError::Negative(amount.to_string()));
        }
        Ok(Money { amount: amount.normalize_keep_scale(), currency })
    }

    pub fn usd(amount: Decimal) -> Result<Self, MoneyError> {
        Money::new(amount, Currency::USD)
    }

    pub fn zero(currency: Currency) -> Self {
        Money { amount: Decimal::ZERO, currency }
    }

    /// Parses EC2's `UpfrontFee` and `CurrencyCode` pair.
    pub fn parse(amount: &str, currency: &str) -> Result<Self, MoneyError> {
        Money::new(parse_amount(amount)?, currency.trim().parse()?)
    }

    pub fn amount(&self) -> Decimal {
        self.amount
    }

    pub fn currency(&self) -> Currency {
        self.currency
    }

    pub fn checked_add(&self, other: &Money) -> Result<Money, MoneyError> {
        if self.currency != other.currency {
            return Err(MoneyError::CurrencyMismatch(self.currency, other.currency));
        }
        Money::new(self.amount + other.amount, self.currency)
    }

    /// Amount per unit, exact to 28 significant digits; `None` when `units` is zero.
    pub fn per(&self, units: Decimal) -> Option<Rate> {
        if units.is_zero() {
            return None;
        }
        Some(Rate { per_unit: self.amount / units, currency: self.currency })
    }
}

impl fmt::Display for Money {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.2} {}", self.amount.round_dp(2), self.currency)
    }
}

/// A price per unit (instance-hour, accelerator-hour), kept at full precision for
/// comparisons; rounded only for display.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Rate {
    #[serde(with = "rust_decimal::serde::str")]
    pub per_unit: Decimal,
    pub currency: Currency,
}

impl Rate {
    /// Four decimals: enough to tell offerings apart, short enough for a table.
    pub fn display(&self) -> String {
        format!("{:.4} {}", self.per_unit.round_dp(4), self.currency)
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal_macros::dec;

    #[test]
    fn parses_ec2_fee_strings_exactly() {
        assert_eq!(Money::parse("12345", "USD").unwrap().amount(), dec!(12345));
        assert_eq!(Money::parse("0.10", "USD").unwrap().amount(), dec!(0.10));
        assert_eq!(Money::parse(" 4617.60 ", "USD").unwrap().amount(), dec!(4617.60));
        let eur = Money::parse("99.999", "EUR").unwrap();
        assert_eq!(eur.currency().as_str(), "EUR");
        assert_eq!(eur.amount(), dec!(99.999));
        assert_eq!(Money::parse("-0", "USD").unwrap().amount(), Decimal::ZERO);
    }

    #[test]
    fn rejects_bad_fee_strings() {
        for bad in ["", "abc", "1e3", "1,000", "NaN", "1.2.3", "+5", "0x10"] {
            assert!(matches!(Money::parse(bad, "USD"), Err(MoneyError::NotADecimal(_))), "{bad:?} should be rejected");
        }
        assert!(matches!(Money::parse("-1", "USD"), Err(MoneyError::Negative(_))));
        for bad in ["usd", "US", "USDX", "", "U$D"] {
            assert!(matches!(Money::parse("1", bad), Err(MoneyError::BadCurrency(_))), "{bad:?}");
        }
    }

    #[test]
    fn adding_different_currencies_is_an_error() {
        let a = Money::parse("1", "USD").unwrap();
        let b = Money::parse("1", "JPY").unwrap();
        assert_eq!(a.checked_add(&b), Err(MoneyError::CurrencyMismatch(Currency::USD, "JPY".parse().unwrap())));
        assert_eq!(a.checked_add(&a).unwrap().amount(), dec!(2));
    }

    #[test]
    fn rate_keeps_full_precision_and_displays_rounded() {
        let fee = Money::parse("1000", "USD").unwrap();
        let r = fee.per(dec!(3)).unwrap();
        assert!(r.per_unit > dec!(333.3333));
        assert!(r.per_unit < dec!(333.3334));
        assert_eq!(r.display(), "333.3333 USD");
        assert!(fee.per(Decimal::ZERO).is_none());
    }

    #[test]
    fn money_serializes_amount_as_string() {
        let m = Money::parse("0.10", "USD").unwrap();
        let j = serde_json::to_string(&m).unwrap();
        assert_eq!(j, r#"{"amount":"0.10","currency":"USD"}"#);
        let back: Money = serde_json::from_str(&j).unwrap();
        assert_eq!(back, m);
    }
}
