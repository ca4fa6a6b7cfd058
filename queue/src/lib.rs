//! kcr-queue (being written)
