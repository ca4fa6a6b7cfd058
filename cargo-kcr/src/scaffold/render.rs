//! Templates with `{{placeholder}}`s: [`render`] fills them and refuses to leave one unfilled.

use crate::scaffold::error::ScaffoldError;

/// A template: its name (for errors) and its text.
#[derive(Debug, Clone, Copy)]
pub struct Template {
    /// The template's name, its path under `templates/`.
    pub name: &'static str,
    /// Its text.
    pub text: &'static str,
}

/// Replaces every `{{key}}` of `template` with its value; fails with
/// [`ScaffoldError::Unfilled`] when a `{{` is left.
pub fn render(template: Template, vars: &[(&str, &str)]) -> Result<String, ScaffoldError> {
    let mut text = template.text.to_string();
    for (key, value) in vars {
        text = text.replace(&format!("{{{{{key}}}}}"), value);
    }
    if let Some(start) = text.find("{{") {
        let rest = &text[start..];
        let end = rest.find("}}").map_or(rest.len().min(40), |e| e + 2);
        return Err(ScaffoldError::Unfilled {
            template: template.name,
            placeholder: rest[..end].to_string(),
        });
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Template = Template {
        name: "t",
        text: "a {{x}} b {{y}} {{x}}",
    };

    #[test]
    fn fills_every_occurrence_and_refuses_leftovers() {
        assert_eq!(render(T, &[("x", "1"), ("y", "2")]).unwrap(), "a 1 b 2 1");
        let err = render(T, &[("x", "1")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "template t: placeholder {{y}} was not filled"
        );
    }
}
