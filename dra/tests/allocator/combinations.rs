//! (rows follow)

use super::common::*;
