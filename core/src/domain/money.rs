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
    #[error("amount {0:?} is more than {max}, more than any fee or budget", max = Money::MAX_AMOUNT)]
    TooLarge(String),
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
    if d > Money::MAX_AMOUNT {
        return Err(MoneyError::TooLarge(s.to_string()));
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

/// An exact, non-negative amount in one currency, at most `Money::MAX_AMOUNT`. Stored amounts
/// are checked on the way in too (`MoneyRecord`): a forged item cannot hold a negative or
/// absurd amount that would overflow the arithmetic on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "MoneyRecord")]
pub struct Money {
    #[serde(with = "rust_decimal::serde::str")]
    amount: Decimal,
    currency: Currency,
}

/// Money as stored, before `Money::new` has checked it.
#[derive(Deserialize)]
struct MoneyRecord {
    #[serde(with = "rust_decimal::serde::str")]
    amount: Decimal,
    currency: Currency,
}

impl TryFrom<MoneyRecord> for Money {
    type Error = MoneyError;
    fn try_from(r: MoneyRecord) -> Result<Self, Self::Error> {
        Money::new(r.amount, r.currency)
    }
}

impl Money {
    /// No fee or budget comes near a million billion; below it, a fee times any count, hour or
    /// minute of a block stays far inside `Decimal`'s range (about 7.9e28).
    pub const MAX_AMOUNT: Decimal = Decimal::from_parts(0xa4c6_8000, 0x0003_8d7e, 0, false, 0); // 10^15

    pub fn new(amount: Decimal, currency: Currency) -> Result<Self, MoneyError> {
        if amount.is_sign_negative() && !amount.is_zero() {
            return Err(MoneyError::Negative(amount.to_string()));
        }
        if amount > Money::MAX_AMOUNT {
            return Err(MoneyError::TooLarge(amount.to_string()));
        }
        let mut amount = amount.normalize_keep_scale();
        // Cents at least, however the amount was written: DynamoDB trims a number's trailing
        // zeros (4608.00 is read back as 4608), and what is shown or exported must not change
        // with where an amount was read from.
        if amount.scale() < 2 {
            amount.rescale(2);
        }
        Ok(Money { amount, currency })
    }

    pub fn usd(amount: Decimal) -> Result<Self, MoneyError> {
        Money::new(amount, Currency::USD)
    }

    pub fn zero(currency: Currency) -> Self {
        Money { amount: Decimal::ZERO, currency }
    }

    /// Parses EC2's `UpfrontFee` and `CurrencyCode` pair. Surrounding spaces are forgiven; an
    /// error names the text as given (" \u{b}" is not "").
    pub fn parse(amount: &str, currency: &str) -> Result<Self, MoneyError> {
        let amount = parse_amount(amount)?;
        let currency = currency.trim().parse().map_err(|_| MoneyError::BadCurrency(currency.to_string()))?;
        Money::new(amount, currency)
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
        let sum =
            self.amount.checked_add(other.amount).ok_or_else(|| MoneyError::TooLarge(format!("{self} + {other}")))?;
        Money::new(sum, self.currency)
    }

    /// Amount per unit, exact to 28 significant digits; `None` when `units` is zero or the
    /// rate is out of `Decimal`'s range (a fraction of a unit can make it so).
    pub fn per(&self, units: Decimal) -> Option<Rate> {
        Some(Rate { per_unit: self.amount.checked_div(units)?, currency: self.currency })
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

    /// An amount keeps its cents however it was written (DynamoDB reads 4608.00 back as 4608):
    /// what is shown and exported is the same from every source; more places are kept.
    #[test]
    fn an_amount_keeps_two_places_at_least() {
        let json = |m: Money| serde_json::to_value(m).unwrap()["amount"].clone();
        assert_eq!(json(Money::usd(dec!(4608)).unwrap()), "4608.00");
        assert_eq!(json(Money::parse("4608.00", "USD").unwrap()), "4608.00");
        assert_eq!(json(Money::parse("0", "USD").unwrap()), "0.00");
        assert_eq!(json(Money::parse("99.999", "EUR").unwrap()), "99.999");
        assert_eq!(Money::usd(dec!(4608)).unwrap(), Money::parse("4608.00", "USD").unwrap());
        let read: Money = serde_json::from_str(r#"{"amount":"4608","currency":"USD"}"#).unwrap();
        assert_eq!(json(read), "4608.00");
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

    /// The error names the currency as given, escaped: a vertical tab was reported as "".
    #[test]
    fn a_bad_currency_is_named_as_given() {
        for given in ["\u{b}", " \t", "usd ", " US D"] {
            let e = Money::parse("1", given).unwrap_err();
            assert_eq!(e, MoneyError::BadCurrency(given.to_string()));
            assert!(e.to_string().contains(&format!("{given:?}")), "{e}");
        }
        assert_eq!(Money::parse("1", " EUR\n").unwrap().currency().as_str(), "EUR");
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
    fn amounts_stay_within_a_bound_that_arithmetic_cannot_overflow() {
        assert_eq!(Money::MAX_AMOUNT, dec!(1_000_000_000_000_000));
        assert!(Money::usd(Money::MAX_AMOUNT).is_ok());
        assert!(matches!(Money::parse("1000000000000000.01", "USD"), Err(MoneyError::TooLarge(_))));
        assert!(matches!(Money::usd(Decimal::MAX), Err(MoneyError::TooLarge(_))));
        let max = Money::usd(Money::MAX_AMOUNT).unwrap();
        assert!(matches!(max.checked_add(&max), Err(MoneyError::TooLarge(_))));
        // A fraction of a unit: the rate would pass Decimal::MAX, so there is none.
        assert!(max.per(dec!(0.0000000000000000000000000001)).is_none());
    }

    /// A stored amount is checked like a new one: a forged item cannot bring a negative or an
    /// overflowing amount back in.
    #[test]
    fn stored_money_is_checked_on_the_way_in() {
        for bad in
            [r#"{"amount":"-5","currency":"USD"}"#, r#"{"amount":"79228162514264337593543950335","currency":"USD"}"#]
        {
            assert!(serde_json::from_str::<Money>(bad).is_err(), "{bad}");
        }
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
