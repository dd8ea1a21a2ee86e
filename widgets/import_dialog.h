// SPDX-License-Identifier: GPL-3.0-or-later
// File → Import tensors…: pick a .npy/.npz/.safetensors file, see its tensors, choose K, V, Q, a head and token ranges.
#pragma once

#include "core/spec/spec.h"

#include <QDialog>

class QComboBox;
class QDialogButtonBox;
class QLabel;
class QLineEdit;
class QSpinBox;
class QTableWidget;

namespace kvlens::widgets {

/// Builds an `imported` spec from a tensor file. Only headers are read here (no tensor data);
/// every change is validated with normalizeSpec, and OK stays disabled while the selection is
/// refused, with the refusal (field and allowed range) shown under the form. A .npy file holds one
/// array, so choosing one lists every .npy file of its folder as a tensor (K, V, Q in files of their own).
class ImportDialog final : public QDialog {
    Q_OBJECT
public:
    /// `base` supplies everything but the data (schemes, budgets, seeds...); `folder` is where Browse starts.
    explicit ImportDialog(ExperimentSpec base, QString folder = {}, QWidget* parent = nullptr);

    /// Loads a file's headers into the table and picks K, V, Q by name (k/key, v/value, q/query).
    void setFile(const QString& path);
    /// The spec the current selection gives (normalized when valid()).
    ExperimentSpec spec() const;
    bool valid() const { return m_valid; }
    /// The chosen file (absolute), or empty.
    QString path() const { return m_path; }
    /// What the validation line says.
    QString message() const;

    // For tests and scripts.
    QComboBox* tensorBox(int which) const; ///< 0 K, 1 V, 2 Q
    QSpinBox* headBox() const { return m_head; }
    QTableWidget* table() const { return m_table; }

private:
    void browse();
    void revalidate();
    void updateRanges();
    /// Tensor name of combo `box` as the spec needs it: a name in the file, or a .npy path.
    std::string sourceOf(const QComboBox* box) const;

    ExperimentSpec m_base;
    QString m_folder;
    QString m_path;
    bool m_npyFolder = false;
    QStringList m_names;            ///< tensor names (or .npy paths in folder mode)
    QList<QList<qint64>> m_shapes;  ///< their shapes
    bool m_valid = false;

    QLineEdit* m_file = nullptr;
    QTableWidget* m_table = nullptr;
    QComboBox* m_k = nullptr;
    QComboBox* m_v = nullptr;
    QComboBox* m_q = nullptr;
    QSpinBox* m_head = nullptr;
    QSpinBox* m_qHead = nullptr;
    QSpinBox* m_batch = nullptr;
    QSpinBox* m_layer = nullptr;
    QSpinBox* m_tokenStart = nullptr;
    QSpinBox* m_tokens = nullptr;
    QSpinBox* m_queryStart = nullptr;
    QSpinBox* m_queries = nullptr;
    QLabel* m_status = nullptr;
    QDialogButtonBox* m_buttons = nullptr;
};

} // namespace kvlens::widgets
